package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestK8sCilium builds the k8s-cilium layout (the k8s layout's cluster
// with Cilium's agents, no operator, instead of Flannel and kube-proxy) and
// checks what it made: both nodes ready, each pod's Cilium endpoint ready,
// the agents routing in BPF over their VXLAN tunnel, and ping and iperf3
// between the pods across cilium_vxlan. Then, h2's agent killed and the
// state file lost, Down removes every process,
// mount, cgroup, namespace and file, leaves the machine's sysctls and
// ruleset as they were, and nothing in the paths Cilium writes by default.
func TestK8sCilium(t *testing.T) {
	needRoot(t)
	needDaemons(t, "k8s-cilium")
	rootRules := ruleset(t, "")
	sysctls := readKeys(t, append(kernelSysctls, ciliumSysctls...))
	out := freshOutside(t)
	start := time.Now()
	tb := up(t, Spec{Name: tbName("cil"), Layout: "k8s-cilium"})
	t.Logf("up in %s", time.Since(start).Round(time.Millisecond))

	bin, err := K8sDir()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kubectl(tb.Name, tb.Hosts[1].Netns, bin, nil, "get", "nodes", "--no-headers")
	if err != nil || strings.Count(string(nodes), " Ready ") != 2 {
		t.Fatalf("kubectl get nodes from h2: %v\n%s", err, nodes)
	}
	eps, err := CiliumEndpoints(tb)
	if err != nil {
		t.Fatal(err)
	}
	_, network, _ := net.ParseCIDR(k8sNetwork)
	for _, h := range tb.Hosts {
		for _, c := range h.Containers {
			if s := eps[h.Name+"-"+c.Name]; s != "ready" {
				t.Errorf("pod %s-%s: Cilium endpoint %q, want ready (all: %v)", h.Name, c.Name, s, eps)
			}
			if !network.Contains(net.ParseIP(c.Addr)) || !strings.HasPrefix(c.HostVeth, "lxc") {
				t.Errorf("%s %s: address %q (want in %s), host veth %q (want lxc...)", h.Name, c.Name, c.Addr, k8sNetwork, c.HostVeth)
			}
		}
		checkAgentStatus(t, tb.Name, h.Name)
	}
	a, b := tb.Hosts[0].Containers[0], tb.Hosts[1].Containers[0]
	ping(t, Endpoint{a.Netns, a.Addr, a.Dev}, Endpoint{b.Netns, b.Addr, b.Dev}, OverlayMTU-28)
	iperf(t, Endpoint{a.Netns, a.Addr, a.Dev}, Endpoint{b.Netns, b.Addr, b.Dev}, false)
	checkOverlayBytes(t, tb.Hosts[1], 512<<10)
	var pids []int
	for _, h := range tb.Hosts {
		pids = append(pids, cgroupPIDs(nodeCgroup(tb.Name, h.Name))...)
	}

	// Down from the testbed's directory alone, h2's agent killed.
	start = time.Now()
	crashAndDown(t, tb.Name, []string{filepath.Join(hostDir(tb.Name, "h2"), "cilium-agent")}, pids)
	t.Logf("down in %s", time.Since(start).Round(time.Millisecond))
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), daemonDir(tb.Name)) {
		t.Errorf("mounts left under %s:\n%s", daemonDir(tb.Name), mi)
	}
	for _, h := range hostNames {
		if m, _ := filepath.Glob("/sys/fs/cgroup/*/" + nodeCgroup(tb.Name, h)); len(m) > 0 {
			t.Errorf("cgroups left: %v", m)
		}
	}
	out.check(t)
	if got := readKeys(t, append(kernelSysctls, ciliumSysctls...)); got != sysctls {
		t.Errorf("machine sysctls changed:\n%s\nwere:\n%s", got, sysctls)
	}
	if r := ruleset(t, ""); r != rootRules {
		t.Errorf("the root namespace's ruleset changed:\n%s\nwas:\n%s", r, rootRules)
	}
}

// checkAgentStatus checks host's agent's cgroup root, and asks it, on
// its API socket in the node's private /run, how it routes: BPF within the
// host, a VXLAN tunnel between hosts, kube-proxy replaced.
func checkAgentStatus(t *testing.T, name, host string) {
	t.Helper()
	pid, ok := daemonPID(filepath.Join(hostDir(name, host), "cilium-agent"))
	if !ok {
		t.Fatalf("%s's cilium-agent does not run", host)
	}
	// Its cgroup root, where its socket programs attach: the node's tree
	// only, bound there (the mount's root is the node's cgroup).
	mi, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	var roots []string
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == "/run/cilium/cgroupv2" {
			roots = append(roots, f[3])
		}
	}
	if want := "/" + nodeCgroup(name, host); len(roots) != 1 || roots[0] != want {
		t.Errorf("%s's cilium-agent: mounts at /run/cilium/cgroupv2 of cgroup %v, want one of %s", host, roots, want)
	}
	// /run, not /var/run: the link /var/run -> /run would resolve in this
	// process's mount namespace.
	sock := fmt.Sprintf("/proc/%d/root/run/cilium/cilium.sock", pid)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://cilium/v1/healthz")
	if err != nil {
		t.Fatalf("%s's cilium-agent: %v", host, err)
	}
	defer resp.Body.Close()
	var s struct {
		Routing struct {
			Intra  string `json:"intra-host-routing-mode"`
			Inter  string `json:"inter-host-routing-mode"`
			Tunnel string `json:"tunnel-protocol"`
		}
		KPR struct{ Mode string } `json:"kube-proxy-replacement"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("%s's cilium-agent status: %v", host, err)
	}
	if s.Routing.Intra != "BPF" || s.Routing.Inter != "Tunnel" || s.Routing.Tunnel != "vxlan" || s.KPR.Mode != "True" {
		t.Errorf("%s's cilium-agent: routing %+v, kube-proxy replacement %q; want BPF, Tunnel, vxlan, True", host, s.Routing, s.KPR.Mode)
	}
}

// readKeys is the values of sysctls keys, one per line.
func readKeys(t *testing.T, keys []string) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		v, err := os.ReadFile(sysctlPath(k))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(k + "=" + strings.TrimSpace(string(v)) + "\n")
	}
	return b.String()
}

// TestK8sCiliumNeedsBuild: without Cilium's build the layout says how to
// build it.
func TestK8sCiliumNeedsBuild(t *testing.T) {
	t.Setenv(CiliumEnv, t.TempDir())
	if _, err := CiliumDir(); err == nil || !strings.Contains(err.Error(), "scripts/cilium/build.sh") {
		t.Fatalf("CiliumDir() without Cilium built: %v", err)
	}
}
