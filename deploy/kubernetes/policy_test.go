package kubernetes

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

const namespace = "falcon-system"

// agentCaps is exactly what the agent may hold; the DaemonSet says why each is
// needed. Adding one must be a deliberate change here too.
var agentCaps = []string{"BPF", "NET_ADMIN", "PERFMON", "SYS_ADMIN", "SYS_NICE", "SYS_PTRACE"}

type daemonSetSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec podSpec `json:"spec"`
	} `json:"template"`
}

type podSpec struct {
	HostNetwork                   bool              `json:"hostNetwork"`
	HostPID                       bool              `json:"hostPID"`
	ServiceAccountName            string            `json:"serviceAccountName"`
	PriorityClassName             string            `json:"priorityClassName"`
	TerminationGracePeriodSeconds int               `json:"terminationGracePeriodSeconds"`
	NodeSelector                  map[string]string `json:"nodeSelector"`
	Tolerations                   []toleration      `json:"tolerations"`
	SecurityContext               struct {
		SeccompProfile *profile `json:"seccompProfile"`
	} `json:"securityContext"`
	InitContainers []container `json:"initContainers"`
	Containers     []container `json:"containers"`
	Volumes        []volume    `json:"volumes"`
}

type toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
}

type volume struct {
	Name      string `json:"name"`
	ConfigMap *struct {
		Name  string            `json:"name"`
		Items []json.RawMessage `json:"items"`
	} `json:"configMap"`
	HostPath *struct {
		Path string `json:"path"`
		Type string `json:"type"`
	} `json:"hostPath"`
}

type profile struct {
	Type string `json:"type"`
}

type container struct {
	Name                     string   `json:"name"`
	Image                    string   `json:"image"`
	ImagePullPolicy          string   `json:"imagePullPolicy"`
	TerminationMessagePolicy string   `json:"terminationMessagePolicy"`
	Command                  []string `json:"command"`
	Args                     []string `json:"args"`
	Env                      []struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		ValueFrom *struct {
			ConfigMapKeyRef *struct {
				Name     string `json:"name"`
				Key      string `json:"key"`
				Optional bool   `json:"optional"`
			} `json:"configMapKeyRef"`
			FieldRef *struct {
				FieldPath string `json:"fieldPath"`
			} `json:"fieldRef"`
		} `json:"valueFrom"`
	} `json:"env"`
	ReadinessProbe *probe `json:"readinessProbe"`
	LivenessProbe  *probe `json:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	} `json:"resources"`
	SecurityContext *struct {
		Privileged               *bool    `json:"privileged"`
		AllowPrivilegeEscalation *bool    `json:"allowPrivilegeEscalation"`
		SeccompProfile           *profile `json:"seccompProfile"`
		Capabilities             *struct {
			Add  []string `json:"add"`
			Drop []string `json:"drop"`
		} `json:"capabilities"`
	} `json:"securityContext"`
	VolumeMounts []struct {
		Name             string `json:"name"`
		MountPath        string `json:"mountPath"`
		ReadOnly         bool   `json:"readOnly"`
		MountPropagation string `json:"mountPropagation"`
	} `json:"volumeMounts"`
}

// objects indexes the manifests by kind; each kind must occur once.
func objects(t *testing.T) map[string]object {
	t.Helper()
	byKind := map[string]object{}
	for _, m := range loadManifests(t) {
		if _, dup := byKind[m.Doc.Kind]; dup {
			t.Errorf("%s: a second %s; the tests expect one of each kind", m.File, m.Doc.Kind)
		}
		byKind[m.Doc.Kind] = m.Doc
		if m.Doc.Kind != "Namespace" && m.Doc.Metadata.Namespace != namespace {
			t.Errorf("%s: %s %s is in namespace %q, want %q", m.File, m.Doc.Kind, m.Doc.Metadata.Name, m.Doc.Metadata.Namespace, namespace)
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet"} {
		if _, ok := byKind[k]; !ok {
			t.Fatalf("no %s among the manifests", k)
		}
	}
	return byKind
}

func agentPod(t *testing.T, objs map[string]object) (daemonSetSpec, container) {
	t.Helper()
	var ds daemonSetSpec
	if err := json.Unmarshal(objs["DaemonSet"].Spec, &ds); err != nil {
		t.Fatalf("DaemonSet spec: %v", err)
	}
	cs := ds.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("DaemonSet has %d containers, want the agent alone", len(cs))
	}
	return ds, cs[0]
}

func TestNamespaceAdmitsTheAgent(t *testing.T) {
	ns := objects(t)["Namespace"]
	if ns.Metadata.Name != namespace {
		t.Errorf("namespace is %q, want %q", ns.Metadata.Name, namespace)
	}
	// Pod Security's baseline level rejects host namespaces and hostPath.
	if lvl := ns.Metadata.Labels["pod-security.kubernetes.io/enforce"]; lvl != "privileged" {
		t.Errorf("namespace enforces Pod Security level %q; the agent's pod is only admitted at \"privileged\"", lvl)
	}
}

func TestAgentPodIsNotPrivileged(t *testing.T) {
	ds, c := agentPod(t, objects(t))
	pod := ds.Template.Spec
	if !pod.HostNetwork || !pod.HostPID {
		t.Errorf("hostNetwork=%v hostPID=%v; the agent needs both", pod.HostNetwork, pod.HostPID)
	}
	seccomp := pod.SecurityContext.SeccompProfile
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil {
			t.Errorf("container %s: no securityContext.capabilities", c.Name)
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s is privileged", c.Name)
		}
		if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
			t.Errorf("container %s drops %v, want [ALL]", c.Name, sc.Capabilities.Drop)
		}
		add := slices.Sorted(slices.Values(sc.Capabilities.Add))
		if !slices.Equal(add, agentCaps) {
			t.Errorf("container %s adds capabilities %v, want exactly %v", c.Name, add, agentCaps)
		}
		// The API server rejects allowPrivilegeEscalation=false next to
		// CAP_SYS_ADMIN; either spelling means the same to the runtime.
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation=false contradicts SYS_ADMIN", c.Name)
		}
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != "RuntimeDefault" {
			t.Errorf("container %s: seccomp profile %v, want RuntimeDefault", c.Name, seccomp)
		}
		if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
			t.Errorf("container %s: needs cpu and memory requests and a memory limit, has %+v", c.Name, c.Resources)
		}
	}
	if cmd := filepath.Base(c.Command[0]); cmd != "falcon" || len(c.Args) == 0 || c.Args[0] != "agent" {
		t.Errorf("agent runs %v %v, want falcon agent", c.Command, c.Args)
	}
}

func TestAgentPodMounts(t *testing.T) {
	ds, c := agentPod(t, objects(t))
	hostPaths := map[string]string{} // volume name -> host path
	types := map[string]string{}
	for _, v := range ds.Template.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		hostPaths[v.Name], types[v.HostPath.Path] = v.HostPath.Path, v.HostPath.Type
		if p := v.HostPath.Path; p == "/" || p == "/dev" || strings.HasPrefix(p, "/dev/") || strings.HasSuffix(p, ".sock") {
			t.Errorf("volume %s exposes %s of the node", v.Name, p)
		}
	}
	mounted := map[string]bool{} // host path -> writable
	for _, m := range c.VolumeMounts {
		if !slices.ContainsFunc(ds.Template.Spec.Volumes, func(v volume) bool { return v.Name == m.Name }) {
			t.Errorf("volumeMount %s names no volume", m.Name)
		}
		// Bidirectional is refused by the API server for unprivileged pods.
		if m.MountPropagation != "" && m.MountPropagation != "None" && m.MountPropagation != "HostToContainer" {
			t.Errorf("volumeMount %s: mountPropagation %s", m.Name, m.MountPropagation)
		}
		if p, ok := hostPaths[m.Name]; ok {
			if p != m.MountPath {
				t.Errorf("node's %s is mounted at %s; the agent looks for it at the same path", p, m.MountPath)
			}
			mounted[p] = !m.ReadOnly
		}
	}
	// Every path the agent writes lies in a writable mount of the node's
	// own directory: elsewhere it would be the pod's read-only root, lost
	// with the pod.
	for _, p := range append(agent.WrittenPaths(), "/sys/class/net", "/sys/fs/bpf") {
		at := ""
		for m := range mounted {
			if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(at) {
				at = m
			}
		}
		switch {
		case at == "":
			t.Errorf("the agent writes %s, which no volume of the node's holds", p)
		case !mounted[at]:
			t.Errorf("the agent writes %s, but the node's %s is mounted read-only", p, at)
		}
	}
	if _, ok := mounted["/run/netns"]; !ok {
		t.Errorf("node's /run/netns is not mounted")
	}
	if types["/run/falcon"] != "DirectoryOrCreate" {
		t.Errorf("/run/falcon hostPath type %q: the journal directory must be created on a fresh node", types["/run/falcon"])
	}
}

func TestAgentPodScheduling(t *testing.T) {
	objs := objects(t)
	ds, c := agentPod(t, objs)
	pod := ds.Template.Spec
	for k, v := range ds.Selector.MatchLabels {
		if ds.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels", k, v)
		}
	}
	if pod.ServiceAccountName != objs["ServiceAccount"].Metadata.Name {
		t.Errorf("pod uses service account %q, the manifests define %q", pod.ServiceAccountName, objs["ServiceAccount"].Metadata.Name)
	}
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", pod.PriorityClassName)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(tl toleration) bool { return tl.Key == "" && tl.Operator == "Exists" }) {
		t.Errorf("tolerations %+v do not tolerate every taint; tainted nodes would run unaccelerated", pod.Tolerations)
	}
	if pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v does not keep the agent to Linux nodes", pod.NodeSelector)
	}
	if pod.TerminationGracePeriodSeconds < 30 {
		t.Errorf("terminationGracePeriodSeconds %d leaves too little time to restore every value", pod.TerminationGracePeriodSeconds)
	}
	for _, p := range []struct {
		name string
		p    *probe
		flag string
	}{{"readinessProbe", c.ReadinessProbe, "--ready"}, {"livenessProbe", c.LivenessProbe, "--alive"}} {
		want := []string{c.Command[0], "status", p.flag}
		var got []string
		if p.p != nil && p.p.Exec != nil {
			got = p.p.Exec.Command
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s runs %q, want %q", p.name, got, want)
		}
	}
	// A restart restores and reapplies every value: only an agent wedged
	// for a while is restarted, never one that is still starting.
	if l := c.LivenessProbe; l != nil && (l.InitialDelaySeconds+l.PeriodSeconds*l.FailureThreshold < 60 || l.TimeoutSeconds < 5) {
		t.Errorf("livenessProbe %+v would restart an agent within a minute of its start, or time out on a busy node", *l)
	}
}

type probe struct {
	Exec *struct {
		Command []string `json:"command"`
	} `json:"exec"`
	InitialDelaySeconds int `json:"initialDelaySeconds"`
	PeriodSeconds       int `json:"periodSeconds"`
	TimeoutSeconds      int `json:"timeoutSeconds"`
	FailureThreshold    int `json:"failureThreshold"`
}

var (
	flagArg = regexp.MustCompile(`^--([a-z][a-z0-9-]*)=(.*)$`)
	varRef  = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
)

// Every setting in the ConfigMap reaches the agent as the flag of the same
// name, and nothing the agent is given refers to a missing setting. The
// mode keys reach it through the ConfigMap's volume instead
// (TestNodeModeFromConfigMap).
func TestConfigMapKeysBecomeAgentFlags(t *testing.T) {
	objs := objects(t)
	cm := objs["ConfigMap"]
	_, c := agentPod(t, objs)

	envKey := map[string]string{} // env var -> ConfigMap key
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.ConfigMapKeyRef
		if ref.Name != cm.Metadata.Name {
			t.Errorf("env %s reads ConfigMap %q, the manifests define %q", e.Name, ref.Name, cm.Metadata.Name)
		}
		if _, ok := cm.Data[ref.Key]; !ok {
			t.Errorf("env %s reads key %q, which the ConfigMap lacks", e.Name, ref.Key)
		}
		if ref.Optional {
			t.Errorf("env %s: optional keys would hide a missing setting", e.Name)
		}
		envKey[e.Name] = ref.Key
	}
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	flagged := map[string]bool{} // ConfigMap keys passed as their own flag
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		for _, m := range varRef.FindAllStringSubmatch(a, -1) {
			// The kubelet leaves an undefined $(VAR) as it is.
			if !defined[m[1]] {
				t.Errorf("argument %q refers to $(%s), which no env entry defines", a, m[1])
			}
		}
		if m := flagArg.FindStringSubmatch(a); m != nil {
			if key, ok := envKey[strings.TrimSuffix(strings.TrimPrefix(m[2], "$("), ")")]; ok {
				if key != m[1] {
					t.Errorf("argument %q passes ConfigMap key %q to flag --%s", a, key, m[1])
				}
				flagged[key] = true
			}
		}
	}
	for key := range cm.Data {
		if !flagged[key] && !isModeKey(key) {
			t.Errorf("ConfigMap key %q never reaches the agent as --%s=$(VAR)", key, key)
		}
	}
}

// The flags the DaemonSet passes must be ones the real binary accepts.
func TestAgentAcceptsManifestFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/falcon")
	}
	_, c := agentPod(t, objects(t))
	bin := filepath.Join(t.TempDir(), "falcon")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/falcon").CombinedOutput(); err != nil {
		t.Fatalf("build falcon: %v\n%s", err, out)
	}
	for _, cmd := range []struct {
		name  string
		flags []string
	}{
		{"agent", flagsOf(c.Args[1:])},
		{"status", flagsOf(c.ReadinessProbe.Exec.Command[2:])},
		{"status", flagsOf(c.LivenessProbe.Exec.Command[2:])},
	} {
		out, _ := exec.Command(bin, cmd.name, "-h").CombinedOutput()
		if strings.Contains(string(out), "unknown command") {
			t.Skipf("falcon %s is not registered yet; cannot check its flags", cmd.name)
		}
		for _, f := range cmd.flags {
			// flag's usage lists each flag as "  -name type" or "  -name".
			if !regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(f) + `(\s|$)`).Match(out) {
				t.Errorf("falcon %s has no flag -%s (manifest passes it):\n%s", cmd.name, f, out)
			}
		}
	}
}

func flagsOf(args []string) []string {
	var fs []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") {
			fs = append(fs, name)
		}
	}
	return fs
}
