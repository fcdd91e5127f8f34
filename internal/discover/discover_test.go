package discover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/labtest"
)

// lab is a small overlay built with ip(8) in namespaces of its own: a
// "host" (h) joined by a veth wire (nic) to a "remote" (r), so the tests do
// not depend on anything else the machine has.
type lab struct {
	t      *testing.T
	prefix string
	procs  []*exec.Cmd
}

func newLab(t *testing.T, tag string) *lab {
	t.Helper()
	labtest.NeedRoot(t)
	l := &lab{t: t, prefix: fmt.Sprintf("fct%d%s", os.Getpid(), tag)}
	t.Cleanup(l.down)
	l.sh(`ip netns add {h}; ip netns add {r}
ip link add {p}nic netns {h} type veth peer name {p}nic netns {r}
ip -n {h} addr add 192.168.77.1/24 dev {p}nic; ip -n {h} link set {p}nic up; ip -n {h} link set lo up
ip -n {r} addr add 192.168.77.2/24 dev {p}nic; ip -n {r} link set {p}nic up`)
	return l
}

func (l *lab) ns(s string) string { return l.prefix + "-" + s }

var nsRef = regexp.MustCompile(`\{[a-z0-9]+\}`)

// sh runs a script after replacing {p} by the device name prefix and any
// other {name} by the namespace of that name in this lab.
func (l *lab) sh(script string) {
	l.t.Helper()
	s := nsRef.ReplaceAllStringFunc(script, func(m string) string {
		if m == "{p}" {
			return l.prefix[:min(len(l.prefix), 12)]
		}
		return l.ns(m[1 : len(m)-1])
	})
	if out, err := exec.Command("sh", "-ec", s).CombinedOutput(); err != nil {
		l.t.Fatalf("%v\n%s\n%s", err, s, out)
	}
}

// anonNS starts a process in a new, unnamed network namespace and returns
// its pid: containers of real runtimes often have no /run/netns entry.
func (l *lab) anonNS() int {
	l.t.Helper()
	cmd := exec.Command("unshare", "-n", "sleep", "600")
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.procs = append(l.procs, cmd)
	for i := 0; i < 100; i++ { // until unshare has exec'd sleep in the new namespace
		a, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
		b, _ := os.Readlink("/proc/self/ns/net")
		if a != "" && a != b {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd.Process.Pid
}

func (l *lab) down() {
	for _, p := range l.procs {
		p.Process.Kill()
		p.Wait()
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], l.prefix+"-") {
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
}

// container makes namespace {name} with eth0 whose peer hv is in namespace
// in.
func (l *lab) container(name, hv, in string) {
	l.sh(fmt.Sprintf(`ip netns add {%[1]s}
ip -n %[3]s link add %[2]s type veth peer name eth0 netns {%[1]s}
ip -n %[3]s link set %[2]s up; ip -n {%[1]s} link set eth0 up`, name, hv, in))
}

type want struct {
	name string
	role Role
	ns   string
}

func check(t *testing.T, o *Overlay, wants []want) {
	t.Helper()
	for _, w := range wants {
		found := false
		for _, d := range o.Devices {
			if d.Name == w.name && d.Netns == w.ns {
				found = true
				if d.Role != w.role {
					t.Errorf("%s: role %s, want %s", d, d.Role, w.role)
				}
			}
		}
		if !found {
			t.Errorf("%s (%s, netns %q) not found", w.name, w.role, w.ns)
		}
	}
	if len(o.Devices) != len(wants) {
		t.Errorf("found %d devices, want %d:", len(o.Devices), len(wants))
		for _, d := range o.Devices {
			t.Logf("  %s", d)
		}
	}
	for _, d := range o.Devices {
		if d.Role == RoleContainer && (d.Peer == nil || d.Peer.Ifindex == 0) {
			t.Errorf("%s: no peer", d)
		}
	}
	if len(o.Warnings) > 0 {
		t.Errorf("warnings: %q", o.Warnings)
	}
}

func TestDocker(t *testing.T) {
	l := newLab(t, "d")
	// No device, no remote: Docker fills the FDB with the peers' VTEPs.
	l.sh(`ip -n {h} link add br0 type bridge; ip -n {h} link set br0 up
ip -n {h} link add vxlan0 type vxlan id 256 dstport 4789
ip -n {h} link set vxlan0 master br0 up
bridge -n {h} fdb append 00:00:00:00:00:00 dev vxlan0 dst 192.168.77.2`)
	l.container("c1", "veth1a2b3c4", "{h}")
	l.container("c2", "veth5d6e7f8", "{h}")
	l.sh(`ip -n {h} link set veth1a2b3c4 master br0; ip -n {h} link set veth5d6e7f8 master br0`)
	o, err := Discover(l.ns("h"))
	if err != nil {
		t.Fatal(err)
	}
	p := l.prefix[:min(len(l.prefix), 12)]
	check(t, o, []want{
		{p + "nic", RoleNIC, l.ns("h")}, {"vxlan0", RoleOverlay, l.ns("h")}, {"br0", RoleBridge, l.ns("h")},
		{"veth1a2b3c4", RoleHostVeth, l.ns("h")}, {"veth5d6e7f8", RoleHostVeth, l.ns("h")},
		{"eth0", RoleContainer, l.ns("c1")}, {"eth0", RoleContainer, l.ns("c2")},
	})
	vx := o.Role(RoleOverlay)[0].VXLAN
	if vx == nil || vx.VNI != 256 || vx.Port != 4789 || vx.NIC != o.Role(RoleNIC)[0].Ifindex {
		t.Errorf("vxlan info %+v", vx)
	}
}

// TestDockerSandbox builds the overlay the way dockerd does: vxlan0 is made
// in the host and moved into a sandbox namespace with the bridge, and a
// container namespace is held only by its process.
func TestDockerSandbox(t *testing.T) {
	l := newLab(t, "s")
	l.sh(`ip netns add {ov}
ip -n {h} link add vxlan0 type vxlan id 4097 dstport 4789 remote 192.168.77.2
ip -n {h} link set vxlan0 netns {ov}
ip -n {ov} link add br0 type bridge; ip -n {ov} link set vxlan0 master br0
ip -n {ov} link set vxlan0 up; ip -n {ov} link set br0 up`)
	pid := l.anonNS()
	l.sh(fmt.Sprintf(`ip -n {ov} link add veth0 type veth peer name eth0 netns %d
ip -n {ov} link set veth0 master br0 up`, pid))
	o, err := Discover(l.ns("h"))
	if err != nil {
		t.Fatal(err)
	}
	p := l.prefix[:min(len(l.prefix), 12)]
	check(t, o, []want{
		{p + "nic", RoleNIC, l.ns("h")}, {"vxlan0", RoleOverlay, l.ns("ov")}, {"br0", RoleBridge, l.ns("ov")},
		{"veth0", RoleHostVeth, l.ns("ov")}, {"eth0", RoleContainer, fmt.Sprintf("/proc/%d/ns/net", pid)},
	})
}

func TestFlannel(t *testing.T) {
	l := newLab(t, "f")
	p := l.prefix[:min(len(l.prefix), 12)]
	l.sh(`ip -n {h} link add flannel.1 type vxlan id 1 local 192.168.77.1 dev {p}nic dstport 8472 nolearning
ip -n {h} link add cni0 type bridge; ip -n {h} link set cni0 up; ip -n {h} link set flannel.1 up
ip -n {h} addr add 10.244.0.0/32 dev flannel.1; ip -n {h} addr add 10.244.0.1/24 dev cni0
ip -n {h} route add 10.244.1.0/24 via 10.244.1.0 dev flannel.1 onlink
ip -n {h} link add docker0 type bridge; ip -n {h} addr add 172.17.0.1/16 dev docker0; ip -n {h} link set docker0 up`)
	l.container("c1", "veth0a1b2c3d", "{h}")
	l.container("c2", "veth9e8f7a6b", "{h}")
	l.sh(`ip -n {h} link set veth0a1b2c3d master cni0; ip -n {h} link set veth9e8f7a6b master docker0`)
	o, err := Discover(l.ns("h"))
	if err != nil {
		t.Fatal(err)
	}
	// flannel.1 is no bridge port: Flannel routes into cni0. docker0 is
	// outside the pod network and stays out.
	check(t, o, []want{
		{p + "nic", RoleNIC, l.ns("h")}, {"flannel.1", RoleOverlay, l.ns("h")}, {"cni0", RoleBridge, l.ns("h")},
		{"veth0a1b2c3d", RoleHostVeth, l.ns("h")}, {"eth0", RoleContainer, l.ns("c1")},
	})
	if vx := o.Role(RoleOverlay)[0].VXLAN; vx.Port != 8472 || vx.Local != "192.168.77.1" {
		t.Errorf("vxlan info %+v", vx)
	}
}

func TestCalico(t *testing.T) {
	l := newLab(t, "c")
	p := l.prefix[:min(len(l.prefix), 12)]
	l.sh(`ip -n {h} link add vxlan.calico type vxlan id 4096 local 192.168.77.1 dstport 4789
ip -n {h} link set vxlan.calico up; ip -n {h} addr add 10.65.0.0/32 dev vxlan.calico`)
	l.container("c1", "cali0123456789a", "{h}")
	l.container("c2", "cali0123456789b", "{h}")
	l.sh(`ip -n {h} route add 10.65.0.2/32 dev cali0123456789a scope link
ip -n {h} route add 10.65.0.3/32 dev cali0123456789b scope link
ip -n {h} route add 10.65.1.0/26 via 10.65.1.0 dev vxlan.calico onlink
ip netns exec {h} sysctl -qw net.ipv4.conf.cali0123456789a.proxy_arp=1`)
	// A VM's tap-like veth with a host route outside the pod network.
	l.container("c3", "vm0", "{h}")
	l.sh(`ip -n {h} route add 172.31.0.5/32 dev vm0 scope link`)
	o, err := Discover(l.ns("h"))
	if err != nil {
		t.Fatal(err)
	}
	check(t, o, []want{
		{p + "nic", RoleNIC, l.ns("h")}, {"vxlan.calico", RoleOverlay, l.ns("h")},
		{"cali0123456789a", RoleHostVeth, l.ns("h")}, {"cali0123456789b", RoleHostVeth, l.ns("h")},
		{"eth0", RoleContainer, l.ns("c1")}, {"eth0", RoleContainer, l.ns("c2")},
	})
}

func TestPlainVXLAN(t *testing.T) {
	l := newLab(t, "v")
	p := l.prefix[:min(len(l.prefix), 12)]
	l.sh(`ip -n {h} link add ovl0 type vxlan id 100 remote 192.168.77.2 dstport 4789
ip -n {h} addr add 10.20.0.1/24 dev ovl0; ip -n {h} link set ovl0 up`)
	o, err := Discover(l.ns("h"))
	if err != nil {
		t.Fatal(err)
	}
	check(t, o, []want{{p + "nic", RoleNIC, l.ns("h")}, {"ovl0", RoleOverlay, l.ns("h")}})
	if vx := o.Role(RoleOverlay)[0].VXLAN; vx.Remote != "192.168.77.2" || vx.VNI != 100 {
		t.Errorf("vxlan info %+v", vx)
	}
}

func TestNoOverlay(t *testing.T) {
	l := newLab(t, "n")
	_, err := Discover(l.ns("h"))
	if !errors.Is(err, ErrNoOverlay) || !strings.Contains(err.Error(), l.ns("h")) {
		t.Errorf("got %v, want a no-overlay error naming the namespace", err)
	}
	_, err = Discover(l.ns("nonexistent"))
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown namespace: got %v", err)
	}
}

func TestSelect(t *testing.T) {
	l := newLab(t, "x")
	p := l.prefix[:min(len(l.prefix), 12)]
	// ovl1 has nothing that tells its underlay; ovl2 routes to the remote.
	l.sh(`ip -n {h} link add ovl1 type vxlan id 1 dstport 4789
ip -n {h} link add ovl2 type vxlan id 2 remote 192.168.77.2 dstport 4790`)
	o, err := Discover(l.ns("h"))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Warnings) != 1 || !strings.Contains(o.Warnings[0], "ovl1") {
		t.Errorf("warnings %q, want one about ovl1's NIC", o.Warnings)
	}
	s, err := Select(o, []string{"ovl2"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, s, []want{{p + "nic", RoleNIC, l.ns("h")}, {"ovl2", RoleOverlay, l.ns("h")}})
	s, err = Select(o, []string{"ovl1", p + "nic"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, s, []want{{p + "nic", RoleNIC, l.ns("h")}, {"ovl1", RoleOverlay, l.ns("h")}})
	if s.Role(RoleOverlay)[0].VXLAN.NIC != s.Role(RoleNIC)[0].Ifindex {
		t.Errorf("ovl1's NIC not set: %+v", s.Role(RoleOverlay)[0].VXLAN)
	}
	for _, bad := range [][]string{{"nosuchdev"}, {"lo", p + "nic"}} {
		if _, err := Select(o, bad); err == nil {
			t.Errorf("Select(%q) succeeded", bad)
		}
	}
}

func TestWatch(t *testing.T) {
	l := newLab(t, "w")
	l.sh(`ip -n {h} link add br0 type bridge; ip -n {h} link set br0 up
ip -n {h} link add vxlan0 type vxlan id 256 dstport 4789 remote 192.168.77.2
ip -n {h} link set vxlan0 master br0 up`)
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan Event, 100)
	done := make(chan error)
	go func() { done <- Watch(ctx, l.ns("h"), func(e Event) { events <- e }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wait := func(typ EventType, role Role, ns string) {
		t.Helper()
		deadline := time.After(20 * time.Second) // a hang guard, not a timing assertion
		for {
			select {
			case e := <-events:
				if e.Type == Failed {
					t.Fatal(e.Err)
				}
				if e.Type == typ && e.Device.Role == role && e.Device.Netns == ns {
					return
				}
			case <-deadline:
				t.Fatalf("no %s event for a %s in %s", typ, role, ns)
			}
		}
	}
	wait(Added, RoleOverlay, l.ns("h"))
	l.container("c1", "veth1", "{h}")
	l.sh(`ip -n {h} link set veth1 master br0`)
	wait(Added, RoleContainer, l.ns("c1"))
	l.sh(`ip netns del {c1}`)
	wait(Removed, RoleContainer, l.ns("c1"))
}
