package stagetrace

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/labtest"
)

// overlay is a miniature Docker-style overlay: host h1 and host h2 joined
// by a veth "wire" (nic0, GRO on at h2), a VXLAN device on each host, and
// on h2 a bridge with a container namespace c1 behind a veth pair. h1 talks
// to c1 over two tunnels: vxlan0 (IPv4 underlay, UDP 4789) for 10.77.0.0/24
// and fd77::/64, and vxlan6 (IPv6 underlay, UDP 8472) for 10.78.0.0/24.
type overlay struct {
	h1, h2, c1 string
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newOverlay builds the overlay. With gro, the wire's sending end has TX
// offloads off, as the testbed's has (DESIGN.md §4): veth then hands h2's
// nic0 full-sized packets through NAPI and GRO, as a real NIC's driver
// does. Without, veth skips its NAPI for packets it got as TSO super-packets
// and delivers them with netif_rx, through the backlog.
func newOverlay(t *testing.T, gro bool) *overlay {
	t.Helper()
	labtest.NeedRoot(t)
	if testing.Short() {
		t.Skip("builds namespaces and sends traffic")
	}
	p := fmt.Sprintf("fct%d", os.Getpid())
	o := &overlay{h1: p + "h1", h2: p + "h2", c1: p + "c1"}
	for _, ns := range []string{o.h1, o.h2, o.c1} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	in := func(ns string, args ...string) { run(t, append([]string{"ip", "-n", ns}, args...)...) }
	run(t, "ip", "link", "add", "nic0", "netns", o.h1, "type", "veth", "peer", "name", "nic0", "netns", o.h2)
	for i, h := range []string{o.h1, o.h2} {
		in(h, "addr", "add", fmt.Sprintf("192.168.77.%d/24", i+1), "dev", "nic0")
		in(h, "addr", "add", fmt.Sprintf("fd00:77::%d/64", i+1), "dev", "nic0", "nodad")
		in(h, "link", "set", "nic0", "up")
		in(h, "link", "set", "lo", "up")
		peer := 2 - i
		in(h, "link", "add", "vxlan0", "type", "vxlan", "id", "42", "dstport", "4789",
			"local", fmt.Sprintf("192.168.77.%d", i+1), "remote", fmt.Sprintf("192.168.77.%d", peer), "dev", "nic0")
		in(h, "link", "add", "vxlan6", "type", "vxlan", "id", "43", "dstport", "8472",
			"local", fmt.Sprintf("fd00:77::%d", i+1), "remote", fmt.Sprintf("fd00:77::%d", peer), "dev", "nic0")
	}
	if gro {
		run(t, "ip", "netns", "exec", o.h1, "ethtool", "-K", "nic0", "tx", "off")
		run(t, "ip", "netns", "exec", o.h2, "ethtool", "-K", "nic0", "gro", "on")
	}
	// Both tunnels end in h2's bridge, so h1 hears c1's ARP twice: answer
	// only on the tunnel that owns the address.
	run(t, "ip", "netns", "exec", o.h1, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1")
	in(o.h1, "addr", "add", "10.77.0.1/24", "dev", "vxlan0")
	in(o.h1, "addr", "add", "fd77::1/64", "dev", "vxlan0", "nodad")
	in(o.h1, "addr", "add", "10.78.0.1/24", "dev", "vxlan6")
	in(o.h1, "link", "set", "vxlan0", "up")
	in(o.h1, "link", "set", "vxlan6", "up")

	in(o.h2, "link", "add", "br0", "type", "bridge")
	in(o.h2, "link", "add", "veth0", "type", "veth", "peer", "name", "eth0", "netns", o.c1)
	for _, d := range []string{"vxlan0", "vxlan6", "veth0"} {
		in(o.h2, "link", "set", d, "master", "br0")
		in(o.h2, "link", "set", d, "up")
	}
	in(o.h2, "link", "set", "br0", "up")
	in(o.c1, "addr", "add", "10.77.0.2/24", "dev", "eth0")
	in(o.c1, "addr", "add", "10.78.0.2/24", "dev", "eth0")
	in(o.c1, "addr", "add", "fd77::2/64", "dev", "eth0", "nodad")
	in(o.c1, "link", "set", "eth0", "up")
	in(o.c1, "link", "set", "lo", "up")
	// Packets that wait for a neighbour leave on the CPU that got the
	// answer, not the sender's: resolve every neighbour first.
	for _, dst := range []string{"10.77.0.2", "10.78.0.2", "fd77::2"} {
		run(t, "ip", "netns", "exec", o.h1, "ping", "-c1", "-W5", dst)
	}
	return o
}
