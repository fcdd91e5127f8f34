package testbed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestK8sDaemonSet applies deploy/kubernetes/ as make image pins it to the
// k8s layout's cluster, with falcon's image (scripts/image) imported into
// both nodes' containerd, as a user without a registry would: the agents are
// Ready on both nodes within a minute, steer the UDP traffic between the
// pods on the two nodes (their metrics' counters move, some packets to
// another CPU), and after kubectl delete every value they changed on
// either node is as it was (sysfs, tc/tcx programs, pins in the node's
// bpffs, /run/falcon). Then one node's
// ConfigMap key names an unknown mode: that node's agent stops with the
// reason as its termination message and changes nothing, the other runs.
func TestK8sDaemonSet(t *testing.T) {
	needRoot(t)
	needDaemons(t, "k8s")
	start := time.Now()
	img, dir := falconImage(t)
	upStart := time.Now()
	tb := up(t, Spec{Name: tbName("kd"), Layout: "k8s"})
	t.Logf("up in %s", time.Since(upStart).Round(time.Millisecond))
	bin, err := K8sDir()
	if err != nil {
		t.Fatal(err)
	}
	importImage(t, tb, img)
	kc := func(args ...string) ([]byte, error) { return kubectl(tb.Name, tb.Hosts[0].Netns, bin, nil, args...) }
	before := []map[string]string{nodeSnapshot(t, tb, 0), nodeSnapshot(t, tb, 1)}

	// Both nodes steer unconditionally: the paper's policy, and a CPU counts
	// as overloaded only at 100 % (the control plane and the transfers
	// keep both CPUs above the default 85, where falcon steps aside).
	applyStart := time.Now()
	const steer = "falcon:policy=paper,threshold=100"
	applyDaemonSet(t, kc, dir, "mode.h1="+steer, "mode.h2="+steer)
	if out, err := kc("-n", "falcon-system", "rollout", "status", "daemonset/falcon-agent", "--timeout=90s"); err != nil {
		t.Fatalf("the DaemonSet's pods not Ready: %v\n%s\n%s", err, out, describe(kc))
	}
	ready := time.Since(applyStart)
	t.Logf("DaemonSet Ready on both nodes %s after kubectl apply", ready.Round(time.Millisecond))
	if ready > time.Minute {
		t.Errorf("Ready after %s, want within 60 s", ready.Round(time.Second))
	}
	for i := range before {
		if n := changed(before[i], nodeSnapshot(t, tb, i)); n == 0 {
			t.Errorf("%s: the agent changed nothing of what the test watches", tb.Hosts[i].Name)
		} else {
			t.Logf("%s: the agent changed %d values (queues, hooks, pins, state)", tb.Hosts[i].Name, n)
		}
	}
	steerPods(t, tb)
	latePod(t, kc, tb.Hosts[1].Netns)
	deleteDaemonSet(t, kc, dir)
	for i := range before {
		sameSnapshot(t, tb.Hosts[i].Name+" after kubectl delete", before[i], nodeSnapshot(t, tb, i))
	}

	// An unknown mode on h2: its agent stops and changes nothing; h1's runs
	// another mode, RPS+ (RPS on the node's devices and its pods' eth0).
	// (Not RFS: its table is the machine's, in the initial namespace only,
	// which no node of the testbed is.)
	applyDaemonSet(t, kc, dir, "mode.h1=rps+", "mode.h2=turbo")
	waitPods(t, kc, func(ps map[string]agentPod) bool {
		return ps["h1"].Ready && strings.Contains(ps["h2"].Message, "unknown mode")
	})
	ps := pods(t, kc)
	t.Logf("h2's termination message: %s", ps["h2"].Message)
	if !strings.Contains(ps["h2"].Message, `"turbo"`) || !strings.Contains(ps["h2"].Message, "falcon") {
		t.Errorf("h2's termination message names neither the mode nor the valid ones: %q", ps["h2"].Message)
	}
	if n := changed(before[0], nodeSnapshot(t, tb, 0)); n == 0 {
		t.Errorf("h1's agent in mode rps+ changed nothing")
	}
	sameSnapshot(t, "h2 with an unknown mode", before[1], nodeSnapshot(t, tb, 1))
	deleteDaemonSet(t, kc, dir)
	sameSnapshot(t, "h1 after the second kubectl delete", before[0], nodeSnapshot(t, tb, 0))
	if err := Down(tb.Name); err != nil {
		t.Fatal(err)
	}
	assertGone(t, tb.Name)
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), daemonDir(tb.Name)) {
		t.Errorf("mounts left under %s:\n%s", daemonDir(tb.Name), mi)
	}
	t.Logf("test (image, up, two applies and deletes, down) in %s", time.Since(start).Round(time.Millisecond))
}

// steerPods sends 8 UDP flows each way between the first pods of h1 and h2
// and requires each node's hooks to have decided on them and given some
// to another CPU: each flow hashes to a CPU of its own choosing, so some
// stages run on another CPU than the one before them.
func steerPods(t *testing.T, tb *Testbed) {
	t.Helper()
	m := []map[string]float64{agentMetrics(t, tb.Hosts[0].Netns), agentMetrics(t, tb.Hosts[1].Netns)}
	a, b := tb.Hosts[0].Containers[0], tb.Hosts[1].Containers[0]
	iperf(t, Endpoint{a.Netns, a.Addr, a.Dev}, Endpoint{b.Netns, b.Addr, b.Dev}, true, "-P", "8")
	iperf(t, Endpoint{b.Netns, b.Addr, b.Dev}, Endpoint{a.Netns, a.Addr, a.Dev}, true, "-P", "8")
	for i, h := range tb.Hosts[:2] {
		decided, moved := steering(m[i], agentMetrics(t, h.Netns))
		t.Logf("%s: the hooks decided on %.0f packets during the transfers, %.0f of them given to another CPU", h.Name, decided, moved)
		if decided < 1000 || moved == 0 {
			t.Errorf("%s: during 2 MB of UDP in 8 flows each way falcon_steered_packets_total moved by %.0f, %.0f of them to another CPU: falcon did not steer the pods' traffic",
				h.Name, decided, moved)
		}
	}
}

// changed counts the values of now that differ from before.
func changed(before, now map[string]string) int {
	n := 0
	for k, v := range now {
		if w, ok := before[k]; !ok || w != v {
			n++
		}
	}
	return n
}

// applyDaemonSet applies the manifests in dir (deploy/kubernetes/ as make
// image pins them), with the ConfigMap made beforehand (kubectl create, so
// that apply keeps them) holding the extra keys (key=value) besides the
// shipped ones.
func applyDaemonSet(t *testing.T, kc func(...string) ([]byte, error), dir string, keys ...string) {
	t.Helper()
	args := []string{"-n", "falcon-system", "create", "configmap", "falcon-agent"}
	for _, kv := range keys {
		args = append(args, "--from-literal="+kv)
	}
	for _, a := range [][]string{{"create", "-f", filepath.Join(dir, "00-namespace.yaml")}, args, {"apply", "-f", dir}} {
		if out, err := kc(a...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(a, " "), err, out)
		}
	}
}

// deleteDaemonSet deletes what deploy/kubernetes/ made and waits until it
// is gone: the agents have restored their nodes and exited.
func deleteDaemonSet(t *testing.T, kc func(...string) ([]byte, error), dir string) {
	t.Helper()
	start := time.Now()
	if out, err := kc("delete", "-f", dir, "--wait=true", "--timeout=120s"); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	t.Logf("kubectl delete -f (the pinned manifests) done in %s", time.Since(start).Round(time.Millisecond))
}

// agentPod is what the test reads of an agent's pod.
type agentPod struct {
	Ready   bool
	Message string // the agent's last termination message
}

// pods are the agents' pods by node.
func pods(t *testing.T, kc func(...string) ([]byte, error)) map[string]agentPod {
	t.Helper()
	out, err := kc("-n", "falcon-system", "get", "pods", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get pods: %v\n%s", err, out)
	}
	type term struct{ Message string }
	var l struct {
		Items []struct {
			Spec   struct{ NodeName string }
			Status struct {
				ContainerStatuses []struct {
					Ready     bool
					State     struct{ Terminated *term }
					LastState struct{ Terminated *term }
				}
			}
		}
	}
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatal(err)
	}
	ps := map[string]agentPod{}
	for _, it := range l.Items {
		var p agentPod
		for _, c := range it.Status.ContainerStatuses {
			p.Ready = c.Ready
			for _, tm := range []*term{c.LastState.Terminated, c.State.Terminated} {
				if tm != nil {
					p.Message = tm.Message
				}
			}
		}
		ps[it.Spec.NodeName] = p
	}
	return ps
}

// waitPods waits up to 90 s until ok holds for the agents' pods.
func waitPods(t *testing.T, kc func(...string) ([]byte, error), ok func(map[string]agentPod) bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !ok(pods(t, kc)); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("agents' pods: %+v\n%s", pods(t, kc), describe(kc))
		}
	}
}

// describe is the agents' pods and events, for a failure's message.
func describe(kc func(...string) ([]byte, error)) string {
	out, _ := kc("-n", "falcon-system", "describe", "pods")
	logs, _ := kc("-n", "falcon-system", "logs", "--tail=20", "-l", "app.kubernetes.io/name=falcon", "--prefix")
	return fmt.Sprintf("%s\n%s", out, logs)
}

// latePod starts a pod on h2 after its agent (netns ns) is up, and checks
// that the agent follows it: its namespace, pinned by containerd under the
// node's /run/netns, reaches the agent's read-only mount of that directory
// (HostToContainer). The pod is deleted again (its sleep, PID 1, ignores
// SIGTERM: no grace period to wait out).
func latePod(t *testing.T, kc func(...string) ([]byte, error), ns string) {
	t.Helper()
	n := agentMetrics(t, ns)["falcon_agent_containers"]
	for _, a := range [][]string{
		{"run", "late", "--image=" + k8sServer, "--image-pull-policy=Never", `--overrides={"apiVersion":"v1","spec":{"nodeName":"h2"}}`},
		{"wait", "--for=condition=Ready", "pod/late", "--timeout=60s"},
	} {
		if out, err := kc(a...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", a[0], err, out)
		}
	}
	start := time.Now()
	for agentMetrics(t, ns)["falcon_agent_containers"] <= n {
		if time.Since(start) > 30*time.Second {
			t.Errorf("h2's agent does not follow a pod started after it (falcon_agent_containers stays %.0f)", n)
			break
		}
	}
	t.Logf("h2's agent followed a new pod %s after it was Ready", time.Since(start).Round(time.Millisecond))
	if out, err := kc("delete", "pod", "late", "--grace-period=1", "--wait=true", "--timeout=60s"); err != nil {
		t.Fatalf("kubectl delete pod: %v\n%s", err, out)
	}
}
