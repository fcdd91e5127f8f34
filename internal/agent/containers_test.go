package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/testbed"
)

// TestContainerAdded adds a container to a running agent's bridge; its
// eth0 must get falcon's RPS, and the original value back on disable.
func TestContainerAdded(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	// Attached throughout: adaptive stands down after 1 s with no CPU
	// busy, and off the path it sets no RPS until it comes back (in the
	// 6.1 guest under emulation the container came after that second).
	o.Policy = datapath.PolicyPaper
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	ns := fmt.Sprintf("fct%dnew", os.Getpid())
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	script := fmt.Sprintf(`ip netns add %[1]s
ip -n %[2]s link add vethnew%[3]d type veth peer name eth0 netns %[1]s
ip -n %[1]s link set eth0 up
ip -n %[2]s link set vethnew%[3]d master %[4]s up`, ns, h.Netns, os.Getpid()%10000, h.Bridge)
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	path := "/sys/class/net/eth0/queues/rx-0/rps_cpus"
	mask := cpuset.Mask(a.Host().Opts.CPUs)
	deadline := time.Now().Add(20 * time.Second) // a hang guard, not a timing assertion
	for read(t, ns, path) != mask {
		if time.Now().After(deadline) {
			t.Fatalf("new container's rps_cpus is %s, never %s", read(t, ns, path), mask)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, ns, path); got != "0" {
		t.Errorf("new container's rps_cpus = %s after disable, want 0", got)
	}
}

// TestContainerRemoved: a container that ends while the agent runs leaves
// no entry behind in the journal, and Stop still succeeds.
func TestContainerRemoved(t *testing.T) {
	needRoot(t)
	tb := bed(t, "calico", 2)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	o.Policy = datapath.PolicyPaper // attached throughout: no stand-down empties the journal first
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	c := h.Containers[1]
	n0 := len(a.Host().journal.Entries())
	if out, err := exec.Command("sh", "-c", "ip -n "+h.Netns+" link del "+c.HostVeth+" && ip netns del "+c.Netns).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for len(a.Host().journal.Entries()) == n0 {
		if time.Now().After(deadline) {
			t.Fatalf("journal kept the ended container's entries: %+v", a.Host().journal.Entries())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, e := range a.Host().journal.Entries() {
		if e.Netns == c.Netns {
			t.Errorf("entry of the ended container left: %+v", e)
		}
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestDockerSandbox runs the agent on dockerd's real layout: vxlan0, br0
// and the host-side veths live in a sandbox namespace, the NIC in the host.
func TestDockerSandbox(t *testing.T) {
	needRoot(t)
	p := fmt.Sprintf("fct%dsb", os.Getpid())
	t.Cleanup(func() {
		for _, n := range []string{"h", "r", "ov", "c"} {
			exec.Command("ip", "netns", "del", p+"-"+n).Run()
		}
	})
	script := strings.NewReplacer("{p}", p).Replace(`
for n in h r ov c; do ip netns add {p}-$n; done
ip link add nic0 netns {p}-h type veth peer name nic0 netns {p}-r
ip -n {p}-h addr add 192.168.78.1/24 dev nic0; ip -n {p}-h link set nic0 up
ip -n {p}-r addr add 192.168.78.2/24 dev nic0; ip -n {p}-r link set nic0 up
ip -n {p}-h link add vxlan0 type vxlan id 4097 dstport 4789 remote 192.168.78.2
ip -n {p}-h link set vxlan0 netns {p}-ov
ip -n {p}-ov link add br0 type bridge; ip -n {p}-ov link set vxlan0 master br0 up; ip -n {p}-ov link set br0 up
ip -n {p}-ov link add veth0 type veth peer name eth0 netns {p}-c
ip -n {p}-ov link set veth0 master br0 up; ip -n {p}-c link set eth0 up`)
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	o := testOptions(t, p+"-h")
	// Adaptive, falcon starts off the path: the test reads what an
	// attach sets.
	o.Policy = datapath.PolicyPaper
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	mask := cpuset.Mask(a.Host().Opts.CPUs)
	if got := read(t, p+"-ov", "/sys/class/net/vxlan0/queues/rx-0/rps_cpus"); got != mask {
		t.Errorf("sandbox vxlan0 rps_cpus %s, want %s", got, mask)
	}
	if got := read(t, p+"-c", "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != mask {
		t.Errorf("container eth0 rps_cpus %s, want %s", got, mask)
	}
	if out := attached(t, p+"-h"); !strings.Contains(out, "nic0 tcx") && !strings.Contains(out, "nic0 clsact") {
		t.Errorf("no hook on the host's NIC:\n%s", out)
	}
	if out := attached(t, p+"-ov"); !strings.Contains(out, "vxlan0 tcx") && !strings.Contains(out, "vxlan0 clsact") {
		t.Errorf("no hook on the sandbox's vxlan0:\n%s", out)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{p + "-h", p + "-ov"} {
		if out := attached(t, ns); strings.Contains(out, "falcon") {
			t.Errorf("left attached in %s:\n%s", ns, out)
		}
	}
	if got := read(t, p+"-c", "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != "0" {
		t.Errorf("container eth0 rps_cpus %s after stop, want 0", got)
	}
}

// TestHostVanished: the host namespace disappears under a running agent
// (a testbed taken down); stopping must still succeed and leave nothing.
func TestHostVanished(t *testing.T) {
	needRoot(t)
	tb := bed(t, "flannel", 1)
	o := testOptions(t, tb.Hosts[1].Netns)
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if err := testbed.Down(tb.Name); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("Stop after the namespace vanished: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(o.pinRoot(), "*", "falcon_*")); len(m) > 0 {
		t.Errorf("pins left: %v", m)
	}
	if _, err := os.Stat(o.stateRoot()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state left: %v", err)
	}
}
