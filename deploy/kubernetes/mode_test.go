package kubernetes

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

// isModeKey says whether a ConfigMap key is one the agent reads from the
// ConfigMap's volume: mode, or mode.<node name>.
func isModeKey(key string) bool {
	return key == agent.ModeKey || strings.HasPrefix(key, agent.NodeModeKey(""))
}

// The agent takes its mode per node from the ConfigMap mounted whole as a
// volume (so that keys added for new nodes appear too), with its node's
// name from the downward API; and an agent that cannot start says why in
// its termination message.
func TestNodeModeFromConfigMap(t *testing.T) {
	objs := objects(t)
	cm := objs["ConfigMap"]
	ds, c := agentPod(t, objs)
	args := map[string]string{}
	for _, a := range c.Args {
		if m := flagArg.FindStringSubmatch(a); m != nil {
			args[m[1]] = m[2]
		}
	}
	if _, ok := args["mode"]; ok {
		t.Errorf("the agent is given --mode=%s as well as --mode-config", args["mode"])
	}
	dir := args["mode-config"]
	var vol string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			vol = m.Name
		}
	}
	found := false
	for _, v := range ds.Template.Spec.Volumes {
		if v.Name == vol && v.ConfigMap != nil {
			found = true
			if v.ConfigMap.Name != cm.Metadata.Name || len(v.ConfigMap.Items) > 0 {
				t.Errorf("volume %s holds ConfigMap %q with items %d; want all of %q", vol, v.ConfigMap.Name, len(v.ConfigMap.Items), cm.Metadata.Name)
			}
		}
	}
	if dir == "" || !found {
		t.Errorf("--mode-config=%q is not where the ConfigMap %s is mounted", dir, cm.Metadata.Name)
	}
	node := varRef.FindStringSubmatch(args["node-name"])
	ok := false
	for _, e := range c.Env {
		if node != nil && e.Name == node[1] && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			ok = e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}
	}
	if !ok {
		t.Errorf("--node-name=%s is not the downward API's spec.nodeName", args["node-name"])
	}
	if c.TerminationMessagePolicy != "FallbackToLogsOnError" {
		t.Errorf("terminationMessagePolicy %q: an agent stopped by a bad mode would not say why in the pod's status", c.TerminationMessagePolicy)
	}
	// Each mode the ConfigMap ships is one the agent knows.
	files := t.TempDir()
	for k, v := range cm.Data {
		if !isModeKey(k) {
			continue
		}
		var o agent.Options
		if err := agent.ParseMode(v, &o); v != "" && err != nil {
			t.Errorf("ConfigMap key %s: %v", k, err)
		}
		if err := os.WriteFile(filepath.Join(files, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if spec, key, err := agent.NodeMode(files, "some-node"); err != nil || key != agent.ModeKey || spec != cm.Data[agent.ModeKey] {
		t.Errorf("a node of no key of its own reads %q from key %q (%v), want key mode", spec, key, err)
	}
}

// The DaemonSet names make image's repository, unpinned, for make image
// to pin to the digest it built (scripts/image, TestPinnedManifests), and
// runs an imported image without a registry.
func TestAgentImage(t *testing.T) {
	_, c := agentPod(t, objects(t))
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no IMAGE ?= for make image")
	}
	if repo, tag, _ := strings.Cut(c.Image, ":"); repo != string(m[1]) || tag == "latest" || strings.Contains(c.Image, "@") {
		t.Errorf("the DaemonSet names image %q; want make image's %s, unpinned (not :latest: make image pins it)", c.Image, m[1])
	}
	if !strings.Contains(string(mk), "-deploy deploy/kubernetes -deploy-out build/kubernetes") {
		t.Error("make image does not pin deploy/kubernetes (-deploy)")
	}
	if c.ImagePullPolicy != "IfNotPresent" {
		t.Errorf("imagePullPolicy %q: an imported image would be pulled from a registry", c.ImagePullPolicy)
	}
}

// renderArgs are the agent's arguments on node as the kubelet renders
// them: $(VAR) from the env, the env from the ConfigMap and the downward
// API.
func renderArgs(t *testing.T, objs map[string]object, node string) []string {
	t.Helper()
	_, c := agentPod(t, objs)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.ConfigMapKeyRef != nil:
			env[e.Name] = objs["ConfigMap"].Data[e.ValueFrom.ConfigMapKeyRef.Key]
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env[e.Name] = node
		}
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, varRef.ReplaceAllStringFunc(a, func(ref string) string { return env[ref[2:len(ref)-1]] }))
	}
	return args
}

// Every mode of the catalogue, set for one node in the shipped ConfigMap,
// runs there as `falcon agent --mode NAME` would: the ConfigMap's other
// keys must not undo what the mode fixes (falcon+split's split, mflow's
// policy, rps+'s container-level).
func TestEveryModeRunsAsNamed(t *testing.T) {
	objs := objects(t)
	cm := objs["ConfigMap"]
	for _, name := range agent.ModeNames() {
		dir := t.TempDir()
		for k, v := range map[string]string{agent.ModeKey: cm.Data[agent.ModeKey], agent.NodeModeKey("node-1"): name} {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var args []string
		for _, a := range renderArgs(t, objs, "node-1")[1:] {
			if v, ok := strings.CutPrefix(a, "--mode-config="); ok && v != "" {
				a = "--mode-config=" + dir
			}
			args = append(args, a)
		}
		got := parseAgent(t, agent.AddAgentFlags, args)
		want := parseAgent(t, agent.AddFlags, []string{"--mode=" + name,
			"--metrics-addr=" + cm.Data["metrics-addr"], "--log-format=" + cm.Data["log-format"]})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("mode %s on its node runs with\n%+v\nwant\n%+v", name, got, want)
		}
	}
}

func parseAgent(t *testing.T, add func(*flag.FlagSet) *agent.Flags, args []string) agent.Options {
	t.Helper()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f := add(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	o, err := f.Options()
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return o
}
