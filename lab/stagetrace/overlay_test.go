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
// offloads off, as the testbed's has (docs/testbed.md#the-wire): veth then hands h2's
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
		quietIPv6(t, ns)
	}
	in := func(ns string, args ...string) { run(t, append([]string{"ip", "-n", ns}, args...)...) }
	run(t, "ip", "link", "add", "nic0", "netns", o.h1, "address", h1MAC, "type", "veth",
		"peer", "name", "nic0", "netns", o.h2, "address", h2MAC)
	for i, h := range []string{o.h1, o.h2} {
		in(h, "addr", "add", fmt.Sprintf("192.168.77.%d/24", i+1), "dev", "nic0")
		in(h, "addr", "add", fmt.Sprintf("fd00:77::%d/64", i+1), "dev", "nic0", "nodad")
		in(h, "link", "set", "nic0", "up")
		in(h, "link", "set", "lo", "up")
		peer := 2 - i
		in(h, "link", "add", "vxlan0", "address", fmt.Sprintf(vx0MAC, i+1), "type", "vxlan", "id", "42", "dstport", "4789",
			"local", fmt.Sprintf("192.168.77.%d", i+1), "remote", fmt.Sprintf("192.168.77.%d", peer), "dev", "nic0")
		in(h, "link", "add", "vxlan6", "address", fmt.Sprintf(vx6MAC, i+1), "type", "vxlan", "id", "43", "dstport", "8472",
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
	in(o.h2, "link", "add", "veth0", "type", "veth", "peer", "name", "eth0", "netns", o.c1, "address", c1MAC)
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
	// Every neighbour is permanent: packets that wait for a neighbour leave
	// on the CPU that got the answer, and a resolved entry goes stale and
	// is probed, h1 answering its peers' probes, so only permanent ones
	// keep h1 from sending anything of its own on the wire.
	h1vx0, h1vx6 := fmt.Sprintf(vx0MAC, 1), fmt.Sprintf(vx6MAC, 1)
	for _, n := range []struct{ ns, addr, dev, mac string }{
		{o.h1, "192.168.77.2", "nic0", h2MAC}, {o.h1, "fd00:77::2", "nic0", h2MAC},
		{o.h1, "10.77.0.2", "vxlan0", c1MAC}, {o.h1, "fd77::2", "vxlan0", c1MAC}, {o.h1, "10.78.0.2", "vxlan6", c1MAC},
		{o.h2, "192.168.77.1", "nic0", h1MAC}, {o.h2, "fd00:77::1", "nic0", h1MAC},
		{o.c1, "10.77.0.1", "eth0", h1vx0}, {o.c1, "fd77::1", "eth0", h1vx0}, {o.c1, "10.78.0.1", "eth0", h1vx6},
	} {
		in(n.ns, "neigh", "replace", n.addr, "lladdr", n.mac, "dev", n.dev, "nud", "permanent")
	}
	for _, dst := range []string{"10.77.0.2", "10.78.0.2", "fd77::2"} {
		run(t, "ip", "netns", "exec", o.h1, "ping", "-c1", "-W5", dst)
	}
	return o
}

// The addresses of the wire's ends, the container's eth0 and host i's
// VXLAN devices, for the permanent neighbours.
const (
	h1MAC  = "02:77:00:00:00:01"
	h2MAC  = "02:77:00:00:00:02"
	c1MAC  = "02:77:00:00:01:02"
	vx0MAC = "02:77:00:00:02:%02x"
	vx6MAC = "02:77:00:00:03:%02x"
)

// quietIPv6 keeps a namespace's IPv6 from sending on its own once its links
// are up: no link-local addresses (so no duplicate address detection), no
// router solicitations, and MLD's repeated reports of a new group within a
// millisecond instead of a second. They come from kworkers (the work items
// of DAD and MLD) and timers, on any CPU: one sent into h1's side of the
// wire moves the NAPI of h2's nic0 to that CPU for a poll, and the test's
// packets in it then race the sender's next ones there, reordered by the
// kernel with nothing of the tracer's attached (seen: 5 datagrams of an
// IPv6 flow, the first handled in a kworker on the other CPU).
func quietIPv6(t *testing.T, ns string) {
	t.Helper()
	run(t, "ip", "netns", "exec", ns, "sysctl", "-qw",
		"net.ipv6.conf.default.addr_gen_mode=1", "net.ipv6.conf.default.accept_ra=0",
		"net.ipv6.conf.default.mldv1_unsolicited_report_interval=1",
		"net.ipv6.conf.default.mldv2_unsolicited_report_interval=1")
}
