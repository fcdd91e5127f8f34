package doctor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

func needRoot(t *testing.T) {
	t.Helper()
	labtest.NeedTestbeds(t)
}

// up builds a testbed with two containers per host, taken down in Cleanup.
func up(t *testing.T, layout string) *testbed.Testbed {
	t.Helper()
	name := fmt.Sprintf("doc%s%s%d", layout[:3], layout[len(layout)-1:], os.Getpid())
	return labtest.Testbed(t, testbed.Spec{Name: name, Layout: layout, Containers: 2})
}

// in runs a command in namespace ns (a name, or a path such as a Docker
// sandbox's) and returns its output.
func in(t *testing.T, ns string, args ...string) string {
	t.Helper()
	enter := []string{"ip", "netns", "exec", ns}
	if strings.Contains(ns, "/") {
		enter = []string{"nsenter", "--net=" + ns} // no sysfs of its own: not for reading /sys
	}
	out, err := exec.Command(enter[0], append(enter[1:], args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// feature reads one feature back with the ethtool command.
func feature(t *testing.T, ns, dev, name string) string {
	t.Helper()
	for _, l := range strings.Split(in(t, ns, "ethtool", "-k", dev), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ": "); ok && k == name {
			return strings.Fields(v)[0]
		}
	}
	t.Fatalf("%s in %s: no feature %s", dev, ns, name)
	return ""
}

func findings(r *Report, check, ns, dev string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Check == check && f.Netns == ns && f.Device == dev {
			out = append(out, f)
		}
	}
	return out
}

func problems(r *Report) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Severity.Problem() && !f.Fixed {
			out = append(out, fmt.Sprintf("%s %s %s/%s: %s", f.Severity, f.Check, f.Netns, f.Device, f.Message))
		}
	}
	return out
}

// planted is one misconfiguration and the finding it must produce.
type planted struct {
	what              string
	check, ns, dev    string
	sev               Severity
	safe              bool
	readBack, wantFix func() bool // state after --fix, for safe ones
}

// TestPlanted plants every kind of misconfiguration doctor checks on the
// receiving host of each container layout, and checks that doctor finds
// each with the right check and device, that --fix repairs the safe ones
// (read back with ethtool, ip and procfs), leaves the others reported, and
// changes nothing on a second run.
func TestPlanted(t *testing.T) {
	needRoot(t)
	for _, layout := range []string{"docker", "flannel", "calico", "flannel-daemon", "docker-swarm"} {
		t.Run(layout, func(t *testing.T) { testPlanted(t, layout) })
	}
}

func testPlanted(t *testing.T, layout string) {
	tb := up(t, layout)
	h := tb.Hosts[1]

	clean, err := Run(Options{Netns: h.Netns})
	if err != nil {
		t.Fatal(err)
	}
	if p := problems(clean); len(p) > 0 {
		t.Errorf("clean %s testbed has problems:\n%s", layout, strings.Join(p, "\n"))
	}
	checkRoles(t, layout, h, clean)

	plants := plantProblems(t, layout, h, clean)

	r, err := Run(Options{Netns: h.Netns})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plants {
		fs := findings(r, p.check, p.ns, p.dev)
		if len(fs) != 1 || fs[0].Severity != p.sev || fs[0].Safe != p.safe || fs[0].Fix == "" {
			t.Errorf("%s: findings %+v, want one %s %s on %s/%s, safe %v, with a fix", p.what, fs, p.sev, p.check, p.ns, p.dev, p.safe)
		}
	}
	if got, want := len(problems(r)), len(plants); got != want {
		t.Errorf("%d problems, want %d (one per plant):\n%s", got, want, strings.Join(problems(r), "\n"))
	}

	checkFixed(t, h, plants)

	again, err := Run(Options{Netns: h.Netns, Fix: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range again.Findings {
		if f.Fixed {
			t.Errorf("second --fix changed %s %s/%s again", f.Check, f.Netns, f.Device)
		}
	}
	var left []string
	for _, p := range plants {
		if !p.safe {
			left = append(left, p.check+" "+p.dev)
		}
	}
	if got := problems(again); len(got) != len(left) {
		t.Errorf("after --fix, problems:\n%s\nwant only the unsafe ones: %v", strings.Join(got, "\n"), left)
	}
}

// checkRoles: a clean testbed's overlay has the devices of every role its
// layout has.
func checkRoles(t *testing.T, layout string, h testbed.Host, clean *Report) {
	t.Helper()
	wantRoles := map[discover.Role]int{discover.RoleNIC: 1, discover.RoleOverlay: 1, discover.RoleHostVeth: 2, discover.RoleContainer: 2}
	if h.Bridge != "" {
		wantRoles[discover.RoleBridge] = 1
	}
	if layout == "docker-swarm" {
		// Docker's ingress network (an overlay on a bridge, a veth to
		// ingress_sbox) and the load balancer's endpoint (a veth).
		wantRoles = map[discover.Role]int{discover.RoleNIC: 1, discover.RoleOverlay: 2, discover.RoleBridge: 2,
			discover.RoleHostVeth: 4, discover.RoleContainer: 4}
	}
	for role, n := range wantRoles {
		if got := len(clean.Overlay.Role(role)); got != n {
			t.Errorf("clean %s: %d devices with role %s, want %d", layout, got, role, n)
		}
	}
}

// plantProblems plants on h a problem of every kind doctor finds, and
// returns what it planted.
func plantProblems(t *testing.T, layout string, h testbed.Host, clean *Report) []planted {
	t.Helper()
	c0, c1 := h.Containers[0], h.Containers[1]
	ons := h.OverlayNS() // where the VXLAN device and the host veths are
	// Someone tuned GRO on for every veth (Docker's own included: the
	// ingress's and the load balancer's); two lost it.
	for _, d := range append(clean.Overlay.Role(discover.RoleHostVeth), clean.Overlay.Role(discover.RoleContainer)...) {
		in(t, d.Netns, "ethtool", "-K", d.Name, "gro", "on")
	}
	in(t, ons, "ethtool", "-K", c1.HostVeth, "gro", "off")
	in(t, c0.Netns, "ethtool", "-K", c0.Dev, "gro", "off")
	in(t, ons, "ethtool", "-K", h.Overlay, "gro", "off", "tx-checksum-ip-generic", "off")
	in(t, c1.Netns, "ethtool", "-K", c1.Dev, "gso", "off")
	in(t, c0.Netns, "ip", "link", "set", c0.Dev, "mtu", "1500")
	zero := "vxz" + strconv.Itoa(os.Getpid()%10000)
	in(t, h.Netns, "ip", "link", "add", zero, "type", "vxlan", "id", "999", "dstport", "4799", "dev", h.NIC, "noudpcsum")
	t.Cleanup(func() { exec.Command("ip", "-n", h.Netns, "link", "del", zero).Run() })

	gro := func(ns, dev string) func() bool {
		return func() bool { return feature(t, ns, dev, "generic-receive-offload") == "on" }
	}
	plants := []planted{
		{what: "GRO off on a host veth", check: CheckGRO, ns: ons, dev: c1.HostVeth, sev: Warn, safe: true, readBack: gro(ons, c1.HostVeth)},
		{what: "GRO off on a container", check: CheckGRO, ns: c0.Netns, dev: c0.Dev, sev: Warn, safe: true, readBack: gro(c0.Netns, c0.Dev)},
		{what: "GRO off on the VXLAN device", check: CheckGRO, ns: ons, dev: h.Overlay, sev: Warn, safe: true, readBack: gro(ons, h.Overlay)},
		{what: "GSO off on a container", check: CheckGSO, ns: c1.Netns, dev: c1.Dev, sev: Warn, safe: true,
			readBack: func() bool { return feature(t, c1.Netns, c1.Dev, "generic-segmentation-offload") == "on" }},
		{what: "container MTU above the overlay's", check: CheckMTU, ns: c0.Netns, dev: c0.Dev, sev: Error, safe: true,
			readBack: func() bool { return in(t, c0.Netns, "cat", "/sys/class/net/"+c0.Dev+"/mtu") == "1450" }},
		{what: "tx checksum offload off on the VXLAN device", check: CheckTxChecksum, ns: ons, dev: h.Overlay, sev: Warn},
		{what: "zero UDP checksums", check: CheckUDPCsum, ns: h.Netns, dev: zero, sev: Warn},
	}
	// RFS half-configured: the socket table is global, so plant it only
	// where nobody else is using RFS right now, and put it back.
	if orig := readSockFlow(t); orig == 0 && layout == "docker" {
		t.Cleanup(func() { os.WriteFile(sockFlowPath, []byte("0\n"), 0o644) })
		in(t, c1.Netns, "sh", "-c", "echo 256 > /sys/class/net/"+c1.Dev+"/queues/rx-0/rps_flow_cnt")
		plants = append(plants, planted{what: "RFS half-configured", check: CheckRFS, ns: c1.Netns, dev: c1.Dev, sev: Warn, safe: true,
			readBack: func() bool { return readSockFlow(t) == defaultSockFlow }})
	} else if layout == "docker" {
		t.Logf("rps_sock_flow_entries is %d (someone uses RFS): RFS plant skipped", orig)
	}
	return plants
}

// checkFixed runs --fix: each safe plant is fixed and reads back fixed,
// and the unsafe ones are left as they are.
func checkFixed(t *testing.T, h testbed.Host, plants []planted) {
	t.Helper()
	ons := h.OverlayNS()
	fixed, err := Run(Options{Netns: h.Netns, Fix: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plants {
		fs := findings(fixed, p.check, p.ns, p.dev)
		if len(fs) != 1 {
			t.Errorf("after --fix, %s: %d findings", p.what, len(fs))
			continue
		}
		if fs[0].Fixed != p.safe || fs[0].FixError != "" {
			t.Errorf("after --fix, %s: fixed %v (%s), want %v", p.what, fs[0].Fixed, fs[0].FixError, p.safe)
		}
		if p.safe && !p.readBack() {
			t.Errorf("after --fix, %s: the system still shows it", p.what)
		}
	}
	if feature(t, ons, h.Overlay, "tx-checksum-ip-generic") != "off" {
		t.Error("--fix changed tx checksum offload on the VXLAN device, which is not a safe fix")
	}
}

func readSockFlow(t *testing.T) int {
	b, err := os.ReadFile(sockFlowPath)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBadInput: an unknown namespace and one without an overlay are clear
// errors, and --fix changes nothing there.
func TestBadInput(t *testing.T) {
	needRoot(t)
	if _, err := Run(Options{Netns: fmt.Sprintf("nosuch%d", os.Getpid()), Fix: true}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown namespace: %v", err)
	}
	ns := fmt.Sprintf("docempty%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	in(t, ns, "ip", "link", "add", "va", "mtu", "9000", "type", "veth", "peer", "name", "vb")
	_, err := Run(Options{Netns: ns, Fix: true})
	if err == nil || !strings.Contains(err.Error(), "no VXLAN overlay") {
		t.Errorf("namespace without overlay: %v", err)
	}
	if got := in(t, ns, "cat", "/sys/class/net/va/mtu"); got != "9000" {
		t.Errorf("--fix on a namespace without overlay changed va's MTU to %s", got)
	}
}

// TestBPFQdiscFinding: the BPF qdisc line is never a problem, on this
// kernel or any other, and names what it is for.
func TestBPFQdiscFinding(t *testing.T) {
	here := bpfQdiscFinding(datapath.BPFQdiscSupported())
	t.Logf("%s %s: %s", here.Severity, here.Check, here.Message)
	for _, f := range []Finding{here, bpfQdiscFinding(nil), bpfQdiscFinding(errors.New("this kernel (6.1.0) has no BPF qdisc: CONFIG_NET_SCH_BPF (Linux 6.16+) is off or absent"))} {
		if f.Check != CheckBPFQdisc || f.Severity.Problem() || !strings.HasPrefix(f.Message, "BPF qdisc (in-order reassembly for mflow)") {
			t.Errorf("finding %+v: want %s, ok or info, named for what it is", f, CheckBPFQdisc)
		}
	}
	if f := bpfQdiscFinding(nil); f.Severity != OK {
		t.Errorf("with a BPF qdisc: %s, want ok", f.Severity)
	}
	if f := bpfQdiscFinding(errors.New("no")); f.Severity != Info || !strings.Contains(f.Message, "nothing falcon ships needs it") {
		t.Errorf("without one: %s %q, want info saying nothing needs it", f.Severity, f.Message)
	}
}
