package testbed

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

// TestFlannelDaemon builds the flannel-daemon layout with the real etcd,
// flanneld and CNI plugins and checks what they made: each host leased a
// /24 of Flannel's network, whose network address flannel.1 holds, each pod
// has an address of its host's lease behind a host veth the bridge plugin
// named on cni0, and pods reach each other across the hosts. Every daemon
// runs inside a host namespace, flanneld's nftables rules are there and the
// root namespace's ruleset is unchanged. Then flanneld on h2 and etcd are
// killed and the state file lost, as a killed 'up' or a crash leaves them,
// and Down still removes every process, namespace and file.
func TestFlannelDaemon(t *testing.T) {
	needRoot(t)
	needDaemons(t, "flannel-daemon")
	for _, tool := range []string{"ping", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (scripts/setup.sh --test installs it): %v", tool, err)
		}
	}
	rootRules := ruleset(t, "")
	_, runFlannelBefore := os.Stat("/run/flannel")
	start := time.Now()
	tb := up(t, Spec{Name: tbName("fd"), Layout: "flannel-daemon", Containers: 2})
	t.Logf("up in %s", time.Since(start).Round(time.Millisecond))

	checkFlannelAddresses(t, tb)
	for _, a := range tb.Hosts[0].Containers {
		for _, b := range tb.Hosts[1].Containers {
			ping(t, Endpoint{a.Netns, a.Addr, a.Dev}, Endpoint{b.Netns, b.Addr, b.Dev}, 1450-28)
			ping(t, Endpoint{b.Netns, b.Addr, b.Dev}, Endpoint{a.Netns, a.Addr, a.Dev}, 64)
		}
	}

	dir, pids := checkFlannelDaemons(t, tb)
	for _, h := range tb.Hosts {
		if r := ruleset(t, h.Netns); !strings.Contains(r, "flannel") {
			t.Errorf("%s: no flannel rules in its nftables ruleset:\n%s", h.Netns, r)
		}
	}
	if r := ruleset(t, ""); r != rootRules {
		t.Errorf("the root namespace's ruleset changed:\n%s\nwas:\n%s", r, rootRules)
	}
	if _, err := os.Stat("/run/flannel"); err == nil && runFlannelBefore != nil {
		t.Errorf("/run/flannel was made")
	}

	// A crash: flanneld on h2 and etcd killed, the state file gone.
	crashAndDown(t, tb.Name, []string{filepath.Join(dir, "etcd"), filepath.Join(dir, "h2", "flanneld")}, pids)
}

// checkFlannelAddresses: each host leased a /24 of the flannel network
// (its overlay's /32, its bridge's gateway), each pod an address of it on
// a bridge plugin's veth; the two hosts different ones.
func checkFlannelAddresses(t *testing.T, tb *Testbed) {
	t.Helper()
	_, network, _ := net.ParseCIDR(flannelNetwork)
	vethRE := regexp.MustCompile(`^veth[0-9a-f]{8}$`)
	for _, h := range tb.Hosts {
		_, lease, err := net.ParseCIDR(h.OverlayAddr + "/24")
		if err != nil || !network.Contains(lease.IP) || !lease.IP.Equal(net.ParseIP(h.OverlayAddr)) {
			t.Fatalf("%s: overlay address %q is not a /24 of %s", h.Name, h.OverlayAddr, network)
		}
		if got := addrs(t, h.Netns, h.Overlay); !strings.Contains(got, h.OverlayAddr+"/32") {
			t.Errorf("%s %s: addresses %s, want %s/32", h.Netns, h.Overlay, got, h.OverlayAddr)
		}
		gw := lease.IP.To4()
		gw = net.IPv4(gw[0], gw[1], gw[2], 1)
		if got := addrs(t, h.Netns, h.Bridge); !strings.Contains(got, gw.String()+"/24") {
			t.Errorf("%s %s: addresses %s, want %s/24", h.Netns, h.Bridge, got, gw)
		}
		for _, c := range h.Containers {
			if !lease.Contains(net.ParseIP(c.Addr)) || c.Addr == gw.String() {
				t.Errorf("%s %s: address %q, not one of %s for pods", h.Name, c.Name, c.Addr, lease)
			}
			if !vethRE.MatchString(c.HostVeth) {
				t.Errorf("%s %s: host veth %q, want the bridge plugin's veth + 8 hex digits", h.Name, c.Name, c.HostVeth)
			}
			out, err := exec.Command("ip", "-n", h.Netns, "-o", "link", "show", c.HostVeth).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "master "+h.Bridge) {
				t.Errorf("%s: %s not on %s: %v %s", h.Netns, c.HostVeth, h.Bridge, err, out)
			}
		}
	}
	if tb.Hosts[0].OverlayAddr == tb.Hosts[1].OverlayAddr {
		t.Fatalf("both hosts leased %s", tb.Hosts[0].OverlayAddr)
	}
}

// checkFlannelDaemons: everything the daemons and plugins write is under
// the daemon directory, and etcd and each flanneld run in their host's
// namespace; it returns the directory and the daemons' pids.
func checkFlannelDaemons(t *testing.T, tb *Testbed) (dir string, pids []int) {
	t.Helper()
	dir = daemonDir(tb.Name)
	for _, f := range []string{"etcd.data/member", "etcd.log", "h1/subnet.env", "h2/flanneld.log",
		"h1/pods/c0.json", "h2/pods/c1.json", "h2/ipam/cbr0", "h2/flannel-cni"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%v", err)
		}
	}
	for base, ns := range map[string]string{"etcd": tb.Hosts[0].Netns, "h1/flanneld": tb.Hosts[0].Netns, "h2/flanneld": tb.Hosts[1].Netns} {
		pid, ok := daemonPID(filepath.Join(dir, base))
		if !ok {
			t.Errorf("%s: not running", base)
			continue
		}
		pids = append(pids, pid)
		if got, want := pidNetns(t, pid), nsInode(t, ns); got != want {
			t.Errorf("%s: pid %d runs in namespace inode %d, not %s's (%d)", base, pid, got, ns, want)
		}
	}
	return dir, pids
}

func addrs(t *testing.T, ns, dev string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-o", "-4", "addr", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s addr show dev %s: %v: %s", ns, dev, err, out)
	}
	return string(out)
}

// ruleset is the nftables ruleset of namespace ns ("" the root one).
func ruleset(t *testing.T, ns string) string {
	t.Helper()
	cmd := exec.Command("nft", "list", "ruleset")
	if ns != "" {
		cmd = inNS(ns, "nft", "list", "ruleset")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset in %q: %v: %s", ns, err, out)
	}
	return string(out)
}

func pidNetns(t *testing.T, pid int) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func nsInode(t *testing.T, ns string) uint64 {
	t.Helper()
	ino, err := netns.Inode(ns)
	if err != nil {
		t.Fatal(err)
	}
	return ino
}

// TestDaemonPIDAcrossExec checks the identity of a daemon's pid file
// through an exec, as 'ip netns exec' makes one: polled all through it, the
// process stays the daemon, and a pid file with another start time (a
// recycled pid) names no daemon.
func TestDaemonPIDAcrossExec(t *testing.T) {
	base := filepath.Join(t.TempDir(), "d")
	cmd := exec.Command("sh", "-c", "sleep 0.2; exec sleep 5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	start, err := startTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".pid", []byte(fmt.Sprintf("%d %d\n", cmd.Process.Pid, start)), 0o644); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); {
		if pid, ok := daemonPID(base); !ok || pid != cmd.Process.Pid {
			t.Fatalf("daemonPID = %d, %v during the exec", pid, ok)
		}
	}
	if err := os.WriteFile(base+".pid", []byte(fmt.Sprintf("%d %d\n", cmd.Process.Pid, start+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, ok := daemonPID(base); ok {
		t.Errorf("a pid file with another start time names pid %d", pid)
	}
}
