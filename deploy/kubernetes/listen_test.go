package kubernetes

import (
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// jsonDocs reads manifests through the validator's YAML parser.
func jsonDocs(t *testing.T, files ...string) []manifest {
	t.Helper()
	out, err := exec.Command(validator(t), append([]string{"--json"}, files...)...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(files, " "), err)
	}
	var ms []manifest
	if err := json.Unmarshal(out, &ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Doc.Metadata.Namespace != namespace {
			t.Errorf("%s: %s in namespace %q, want %q", m.File, m.Doc.Kind, m.Doc.Metadata.Namespace, namespace)
		}
	}
	return ms
}

// loopback says whether a listen address's host keeps it on the node.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listeners are the addresses the agent's pod listens on, as the kubelet
// renders its arguments ($(VAR) from the env, the env from the ConfigMap):
// the agent's one listener is --metrics-addr ("" = none).
func listeners(t *testing.T, objs map[string]object) []string {
	t.Helper()
	var addrs []string
	for _, a := range renderArgs(t, objs, "node-1") {
		if v, ok := strings.CutPrefix(a, "--metrics-addr="); ok && v != "" {
			addrs = append(addrs, v)
		}
	}
	return addrs
}

// Nothing of the agent's listens beyond the node's loopback unless the
// ConfigMap asks: the pod is on the node's network, and its metrics need
// no credentials.
func TestNoListenerBeyondLoopback(t *testing.T) {
	objs := objects(t)
	ls := listeners(t, objs)
	if len(ls) == 0 {
		t.Fatal("the agent serves no metrics by default; the ConfigMap's metrics-addr should keep them on the node")
	}
	for _, a := range ls {
		host, _, err := net.SplitHostPort(a)
		if err != nil || !loopback(host) {
			t.Errorf("the agent listens on %q: beyond the node's loopback without being asked", a)
		}
	}
	_, c := agentPod(t, objs)
	var spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Ports []struct {
						HostIP string `json:"hostIP"`
					} `json:"ports"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	}
	if err := json.Unmarshal(objs["DaemonSet"].Spec, &spec); err != nil {
		t.Fatal(err)
	}
	for _, p := range spec.Template.Spec.Containers[0].Ports {
		if p.HostIP != "" && !loopback(p.HostIP) {
			t.Errorf("container %s binds a host port on %s", c.Name, p.HostIP)
		}
	}
	// Asked: the check sees it.
	cm := objs["ConfigMap"]
	cm.Data = map[string]string{}
	for k, v := range objs["ConfigMap"].Data {
		cm.Data[k] = v
	}
	cm.Data["metrics-addr"] = ":9750"
	objs["ConfigMap"] = cm
	if ls := listeners(t, objs); len(ls) != 1 || ls[0] != ":9750" {
		t.Errorf("with metrics-addr :9750 the rendered listeners are %q", ls)
	}
}
