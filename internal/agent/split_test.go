package agent

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/seqcheck"
)

// xdpOn names the XDP program attached to dev in ns, "" when none.
func xdpOn(t *testing.T, ns, dev string) string {
	t.Helper()
	name := ""
	err := netns.Do(ns, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		x := l.Attrs().Xdp
		if x == nil || !x.Attached || x.ProgId == 0 {
			return nil
		}
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
		if err != nil {
			return err
		}
		defer p.Close()
		info, err := p.Info()
		if err != nil {
			return err
		}
		name = info.Name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func cpumaps(t *testing.T) int {
	t.Helper()
	n := 0
	var id ebpf.MapID
	for {
		var err error
		if id, err = ebpf.MapGetNextID(id); err != nil {
			return n
		}
		if m, err := ebpf.NewMapFromID(id); err == nil {
			if info, err := m.Info(); err == nil && info.Type == ebpf.CPUMap {
				n++
			}
			m.Close()
		}
	}
}

// fourFlowsInOrder sends 4 UDP flows of 300 datagrams from clNS (on CPU
// 0) to addr:port in srvNS, each of which must arrive in order.
func fourFlowsInOrder(t *testing.T, clNS, srvNS, addr string, port uint16) {
	t.Helper()
	dst := netip.MustParseAddr(addr)
	rcv, err := seqcheck.Listen(srvNS, dst, port)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	ctx := context.Background()
	if err := seqcheck.Send(ctx, seqcheck.SendOptions{Netns: clNS, Dst: dst, Port: port, Flows: 4, PktsPerFlow: 300, Size: 64, CPU: 0}); err != nil {
		t.Fatal(err)
	}
	stats, err := rcv.Wait(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for from, s := range stats {
		if s.Reordered != 0 {
			t.Errorf("flow from %s: %d reordered", from, s.Reordered)
		}
	}
}

// TestSplitEnableStatusDisable: with --split --split-cpus 1 the agent puts
// XDP on the NIC, status shows the split CPU's cpumap building the NIC
// stage's skbs, and stopping removes the XDP program and the cpumap.
//
// guest: the agent's split: XDP and a cpumap without GRO on 6.1
func TestSplitEnableStatusDisable(t *testing.T) {
	needSplit(t)
	needRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	tb := bed(t, "docker", 1)
	h := tb.Hosts[1]
	cl, sv := tb.Hosts[0].Containers[0], h.Containers[0]
	maps := cpumaps(t)
	o := testOptions(t, h.Netns)
	o.CPUs, o.Split, o.SplitCPUs = []int{0, 1}, true, []int{1}
	// Split whatever it costs, however busy the machine (other tests share
	// it): the test checks where skbs are built.
	o.Policy, o.AlwaysOn = datapath.PolicyPaper, true
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.Stop()
		}
	}()
	if got := xdpOn(t, h.Netns, h.NIC); got != "falcon_split" {
		t.Errorf("XDP on %s: %q, want falcon_split", h.NIC, got)
	}
	splitRecorded(t, a, h.NIC)

	// Neighbours first: a packet waiting for ARP leaves on the CPU that
	// got the answer.
	if out, err := exec.Command("ip", "netns", "exec", cl.Netns, "ping", "-c", "1", "-W", "2", sv.Addr).CombinedOutput(); err != nil {
		t.Fatalf("ping: %v: %s", err, out)
	}
	fourFlowsInOrder(t, cl.Netns, sv.Netns, sv.Addr, 40126)

	checkSplitStatus(t, o)

	stopped = true
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := xdpOn(t, h.Netns, h.NIC); got != "" {
		t.Errorf("XDP program %q left on %s", got, h.NIC)
	}
	noTrace(t, tb, o)
	// The cpumap goes after an RCU grace period and its kthreads' stop.
	for i := 0; cpumaps(t) > maps && i < 500; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if n := cpumaps(t); n > maps {
		t.Errorf("%d cpumaps, %d before: the agent's is left", n, maps)
	}
}

// TestSplitBadInput: split CPUs the machine lacks, unknown protocols, split
// settings without --split or outside the falcon mode, and a NIC without
// native XDP are refused before anything changes.
func TestSplitBadInput(t *testing.T) {
	needRoot(t)
	ns := bridgeOverlay(t)
	ov, err := discover.Discover(ns)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ov)

	cases := []badStart{
		{"split cpu", func(o *Options) { o.Split, o.SplitCPUs = true, []int{4095} }, "--split-cpus: CPU 4095 does not exist"},
		{"empty split cpus", func(o *Options) { o.Split, o.SplitCPUs = true, []int{} }, "--split-cpus: empty"},
		{"proto", func(o *Options) { o.Split, o.SplitProto = true, "sctp" }, "--split-proto \"sctp\""},
		{"cpus without split", func(o *Options) { o.SplitCPUs = []int{0} }, "need --split"},
		{"rps mode", func(o *Options) { o.Split, o.Mode = true, ModeRPS }, "--split needs mode falcon"},
		{"no native XDP", func(o *Options) { o.Split = true }, "no native XDP"},
		{"mflow udp", func(o *Options) { o.Split, o.Batch, o.SplitProto = true, 64, "udp" }, "needs --allow-reorder"},
		{"mflow offline split cpu", func(o *Options) { o.Split, o.Batch, o.SplitCPUs = true, 64, []int{4095} }, "CPU 4095 does not exist"},
		{"batch without split", func(o *Options) { o.Batch = 64 }, "--batch needs --split"},
		{"batch too large", func(o *Options) { o.Split, o.Batch = true, datapath.MaxBatch+1 }, "--batch 1048577: want 1..1048576"},
		{"allow-reorder alone", func(o *Options) { o.AllowReorder = true }, "--allow-reorder needs micro-flows"},
		{"host nics without split", func(o *Options) { o.HostNICs = []string{"lo"} }, "--host-nics need --split"},
		{"host nic missing", func(o *Options) { o.Split, o.HostNICs = true, []string{"nosuch0"} }, `no device "nosuch0"`},
		{"host nic under the overlay", func(o *Options) { o.Split, o.HostNICs = true, []string{"fbr0"} }, "fbr0 is a device of the overlay (nic)"},
		{"host nic vxlan", func(o *Options) { o.Split, o.HostNICs = true, []string{"fvx0"} }, "fvx0 is a device of the overlay (overlay)"},
		{"host nic loopback", func(o *Options) { o.Split, o.HostNICs = true, []string{"lo"} }, "lo is the loopback device"},
		{"host nic twice", func(o *Options) { o.Split, o.HostNICs = true, []string{"fbr0", "fbr0"} }, "fbr0 named twice"},
	}
	if err := datapath.SplitSupported(); err != nil {
		// This kernel cannot split at all: it says so before the NIC.
		for i := range cases {
			if cases[i].name == "no native XDP" {
				cases[i].want = "which --split needs"
			}
		}
	}
	maps := cpumaps(t)
	startRejects(t, ns, cases)
	if got := xdpOn(t, ns, "fbr0"); got != "" {
		t.Errorf("XDP program %q on fbr0", got)
	}
	if out := attached(t, ns); strings.Contains(out, "falcon") {
		t.Errorf("BPF programs attached:\n%s", out)
	}
	if n := cpumaps(t); n > maps {
		t.Errorf("%d cpumaps, %d before", n, maps)
	}
	unchanged(t, ov, before)
}

// bridgeOverlay makes a namespace with an overlay whose underlay is a
// bridge (fvx0 over fbr0): no native XDP there.
func bridgeOverlay(t *testing.T) string {
	t.Helper()
	ns := "fct" + strings.TrimPrefix(t.Name(), "Test") + strconv.Itoa(os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run("-n", ns, "link", "add", "fbr0", "type", "bridge")
	run("-n", ns, "addr", "add", "192.0.2.1/24", "dev", "fbr0")
	run("-n", ns, "link", "set", "fbr0", "up")
	run("-n", ns, "link", "add", "fvx0", "type", "vxlan", "id", "42", "dstport", "4789", "local", "192.0.2.1", "dev", "fbr0")
	run("-n", ns, "link", "set", "fvx0", "up")
	return ns
}

// TestSplitHostNICs is FALCON's Host+ through the agent: on the host
// layout, which has no overlay, --split --host-nics names h2's wire end; the
// agent puts the split program and the guard's arrival counter on it,
// records both for a disable after a crash, and the host's own sockets get
// their datagrams in order through the split CPU; status shows the split
// CPU building them; stopping leaves nothing.
func TestSplitHostNICs(t *testing.T) {
	needSplit(t)
	needRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	tb := bed(t, "host", 0)
	h1, h2 := tb.Hosts[0], tb.Hosts[1]
	o := testOptions(t, h2.Netns)
	o.CPUs, o.Split, o.SplitCPUs, o.HostNICs = []int{0, 1}, true, []int{1}, []string{h2.NIC}
	o.Policy, o.AlwaysOn = datapath.PolicyPaper, true // as in TestSplitEnableStatusDisable
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.Stop()
		}
	}()
	if got := xdpOn(t, h2.Netns, h2.NIC); got != "falcon_split" {
		t.Errorf("XDP on %s: %q, want falcon_split", h2.NIC, got)
	}
	st, err := readState(a.Host().Dir)
	if err != nil {
		t.Fatal(err)
	}
	var split, arrival bool
	for _, hk := range st.Hooks {
		split = split || (hk.Role == datapath.HookSplit && hk.Name == h2.NIC && hk.HostNIC)
		arrival = arrival || (hk.Role == datapath.HookArrival && hk.Name == h2.NIC && hk.HostNIC)
	}
	if !split || !arrival {
		t.Errorf("state hooks %+v: want the split and the arrival counter on %s recorded as a host NIC's", st.Hooks, h2.NIC)
	}
	if out := attached(t, h2.Netns); !strings.Contains(out, "falcon_at_nic") {
		t.Errorf("no arrival counter on %s:\n%s", h2.NIC, out)
	}

	if out, err := exec.Command("ip", "netns", "exec", h1.Netns, "ping", "-c", "1", "-W", "2", h2.Addr).CombinedOutput(); err != nil {
		t.Fatalf("ping: %v: %s", err, out)
	}
	fourFlowsInOrder(t, h1.Netns, h2.Netns, h2.Addr, 40136)
	r, err := Status(o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Ready || r.Split == nil || len(r.Stages) == 0 || r.Stages[0].Role != datapath.HookSplit {
		t.Fatalf("status: ready %v, problem %q, split %+v, stages %+v", r.Ready, r.Problem, r.Split, r.Stages)
	}
	sp, cs := r.Stages[0], r.Split.PerCPU[1]
	t.Logf("split stage: ran on %v, sent to %v, decisions %+v; cpumap CPU 1: %+v", sp.RanOn, sp.SteeredTo, sp.Decisions, cs)
	// Only stale load keeps flows on the interrupt CPU: CPU 1 is the only
	// split CPU, both hash choices, busy or not (always on).
	if sp.Decisions.Fallback == 0 && (sp.SteeredTo[1] < 4*300-64 || cs.Built == 0) {
		t.Errorf("split stage sent %v and CPU 1 built %d, want the %d datagrams on CPU 1 (less at most a poll held inline)", sp.SteeredTo, cs.Built, 4*300)
	}

	stopped = true
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := xdpOn(t, h2.Netns, h2.NIC); got != "" {
		t.Errorf("XDP program %q left on %s", got, h2.NIC)
	}
	noTrace(t, tb, o)
}

// splitRecorded: the agent's state records the split hook on nic, for a
// disable after a crash.
func splitRecorded(t *testing.T, a *Agent, nic string) {
	t.Helper()
	st, err := readState(a.Host().Dir)
	if err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, hk := range st.Hooks {
		recorded = recorded || (hk.Role == datapath.HookSplit && hk.Name == nic)
	}
	if !recorded {
		t.Errorf("state hooks %+v: the split hook is not recorded for disable after a crash", st.Hooks)
	}
}

// checkSplitStatus: status shows the split stage first, sending the flows'
// packets to CPU 1, whose cpumap built them.
func checkSplitStatus(t *testing.T, o Options) {
	t.Helper()
	r, err := Status(o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Ready || r.Split == nil {
		t.Fatalf("status: ready %v, problem %q, split %+v", r.Ready, r.Problem, r.Split)
	}
	if r.Split.CPUs != "1" || r.Split.Proto != datapath.SplitAll {
		t.Errorf("split CPUs %q proto %q, want 1 and all", r.Split.CPUs, r.Split.Proto)
	}
	if len(r.Stages) == 0 || r.Stages[0].Role != datapath.HookSplit {
		t.Fatalf("stages %+v: want the split stage first", r.Stages)
	}
	// Only stale load can switch splitting off for some flows: those stay
	// on the interrupt CPU, 0. CPU 1, the only split CPU, is both hash
	// choices, busy or not, and always on ignores the average.
	sp, cs := r.Stages[0], r.Split.PerCPU[1]
	t.Logf("split stage: ran on %v, sent to %v, decisions %+v; cpumap CPU 1: %+v", sp.RanOn, sp.SteeredTo, sp.Decisions, cs)
	if sp.SteeredTo[0]+sp.SteeredTo[1] < 4*300 || (sp.Decisions.Fallback == 0 && sp.SteeredTo[1] < 4*300) || sp.SteeredTo[1] == 0 {
		t.Errorf("split stage sent %v, want all %d packets to CPU 1 but those of fallen-back flows", sp.SteeredTo, 4*300)
	}
	// Held frames were built where they were polled: on CPU 1, counted
	// as sent there but not redirected (the GRO gate, bpf/split.c).
	if got := cs.Built + cs.BuildDrops + cs.EnqueueDrops; got > sp.SteeredTo[1] || got+sp.Decisions.GuardHolds < sp.SteeredTo[1] {
		t.Errorf("cpumap CPU 1: %+v, but %d packets were sent to it, %d of all held", cs, sp.SteeredTo[1], sp.Decisions.GuardHolds)
	}
}
