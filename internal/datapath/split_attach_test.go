package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/falconnet/falcon/internal/netns"
)

func splitTestConfig() Config {
	cfg := DefaultConfig()
	cfg.CPUs = []int{0}
	return cfg
}

func cpumapIDs(t *testing.T) map[ebpf.MapID]bool {
	t.Helper()
	ids := map[ebpf.MapID]bool{}
	var id ebpf.MapID
	for {
		var err error
		id, err = ebpf.MapGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		if info, err := m.Info(); err == nil && info.Type == ebpf.CPUMap {
			ids[id] = true
		}
		m.Close()
	}
}

// TestSplitAttachDetach: the XDP program, the cpumap's entries (kthreads),
// its counters' pin and the tracepoints come with the first split hook and
// go with the last, by DetachSplit and by Close. After DetachSplit the
// programs and the cpumap stay loaded, for the next attach to reuse (no
// verifier run at a comeback); Close removes them.
//
// guest: XDP and a cpumap without GRO on 6.1
func TestSplitAttachDetach(t *testing.T) {
	needSplit(t)
	ns, a, _ := testNetns(t)
	pin := testPinDir(t)
	d, err := Load(splitTestConfig(), pin)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := SplitHook{Netns: ns, Ifindex: a, Name: "fva"}
	var parked, parkedMap uint32 // the program and cpumap DetachSplit kept
	for _, stop := range []string{"DetachSplit", "Close"} {
		if err := d.AttachSplit(h); err != nil {
			t.Fatal(err)
		}
		prog, cm := d.XDPProgramID(h), d.CPUMapID()
		if parked != 0 && (uint32(prog) != parked || uint32(cm) != parkedMap) {
			t.Errorf("attach after DetachSplit: program %d, cpumap %d; want the kept %d, %d", prog, cm, parked, parkedMap)
		}
		if got := xdpProg(t, ns, a); prog == 0 || got != uint32(prog) {
			t.Fatalf("XDP on fva: program %d, want %d", got, prog)
		}
		if _, err := os.Stat(filepath.Join(pin, splitStatsPin)); err != nil {
			t.Errorf("cpumap statistics not pinned: %v", err)
		}
		var tps []ebpf.ProgramID
		for _, p := range d.split.progs {
			info, _ := p.Info()
			id, _ := info.ID()
			tps = append(tps, id)
		}
		if len(d.Splits()) != 1 {
			t.Errorf("Splits() = %v", d.Splits())
		}
		if stop == "DetachSplit" {
			err = d.DetachSplit(h)
		} else {
			err = d.Close()
		}
		if err != nil {
			t.Fatalf("%s: %v", stop, err)
		}
		if got := xdpProg(t, ns, a); got != 0 {
			t.Errorf("%s: XDP program %d still on fva", stop, got)
		}
		if d.CPUMapID() != 0 || len(d.Splits()) != 0 {
			t.Errorf("%s: the datapath still holds a cpumap or split hooks", stop)
		}
		if _, err := os.Stat(filepath.Join(pin, splitStatsPin)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: cpumap statistics still pinned (%v)", stop, err)
		}
		if stop == "DetachSplit" {
			if n := cpumapEntries(t, cm); n != 0 {
				t.Errorf("DetachSplit: the kept cpumap has %d entries (kthreads), want none", n)
			}
			parked, parkedMap = uint32(prog), uint32(cm)
			continue
		}
		checkProgsGone(t, append(tps, prog))
		waitMapGone(t, cm)
	}
}

func cpumapEntries(t *testing.T, id ebpf.MapID) int {
	t.Helper()
	m, err := ebpf.NewMapFromID(id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var k, v uint32
	n := 0
	for it := m.Iterate(); it.Next(&k, &v); {
		n++
	}
	return n
}

// TestSplitBadInputChangesNothing: a NIC without native XDP, a NIC that runs
// someone else's XDP program, split CPUs this machine lacks, unknown
// namespaces and devices: clear errors, and nothing is created.
//
// guest: XDP and a cpumap without GRO on 6.1: bad input must leave nothing there either
func TestSplitBadInputChangesNothing(t *testing.T) {
	needSplit(t)
	ns, a, b := testNetns(t)
	if out, err := exec.Command("ip", "-n", ns, "link", "add", "fbr0", "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("add bridge: %v: %s", err, out)
	}
	bridge := ifindex(t, ns, "fbr0") // no native XDP
	// someone else's XDP program on fvb
	other, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var ol link.Link
	if err := netns.Do(ns, func() error {
		ol, err = link.AttachXDP(link.XDPOptions{Program: other, Interface: b, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ol.Close()

	before := cpumapIDs(t)
	d, err := Load(splitTestConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cases := []struct {
		name, want string
		h          SplitHook
	}{
		{"no native XDP", "generic XDP, which runs after skb allocation", SplitHook{Netns: ns, Ifindex: bridge, Name: "fbr0"}},
		{"another XDP program", "already runs XDP program", SplitHook{Netns: ns, Ifindex: b, Name: "fvb"}},
		{"unknown netns", "fct-no-such", SplitHook{Netns: "fct-no-such-netns", Ifindex: a}},
		{"gone ifindex", "9999", SplitHook{Netns: ns, Ifindex: 9999}},
		{"name mismatch", "is fva now", SplitHook{Netns: ns, Ifindex: a, Name: "fvb"}},
		{"no ifindex", "ifindex must be positive", SplitHook{Netns: ns}},
	}
	for _, c := range cases {
		err := d.AttachSplit(c.h)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	cfg := splitTestConfig()
	cfg.SplitCPUs = []int{n}
	if err := d.SetConfig(cfg); err != nil {
		t.Fatal(err) // valid ids; whether they exist is AttachSplit's business
	}
	err = d.AttachSplit(SplitHook{Netns: ns, Ifindex: a, Name: "fva"})
	if want := fmt.Sprintf("split CPU %d does not exist", n); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("split CPU %d: %v, want %q", n, err, want)
	}
	if err := d.Attach(SplitHook{Netns: ns, Ifindex: a}.Hook()); err == nil {
		t.Error("Attach took a split hook for a tc hook")
	}

	if got := xdpProg(t, ns, a); got != 0 {
		t.Errorf("XDP program %d on fva after failed attaches", got)
	}
	if got := xdpProg(t, ns, bridge); got != 0 {
		t.Errorf("XDP program %d on the bridge after failed attaches", got)
	}
	if d.split != nil || len(d.splits) != 0 || d.ids[0] {
		t.Error("failed attaches left split state in the datapath")
	}
	for id := range cpumapIDs(t) {
		if !before[id] {
			t.Errorf("failed attaches left cpumap %d", id)
		}
	}
}

// TestSplitCleanup: a killed agent's XDP link outlives it (pinned) until
// Cleanup; a hung agent's live link is detached by Cleanup.
//
// guest: the split's pinned XDP link across a kill, on 6.1
func TestSplitCleanup(t *testing.T) {
	needSplit(t)
	ns, a, _ := testNetns(t)
	pin := testPinDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("FALCON_TEST_AGENT=%s,%d,%s,tcx,split", ns, a, pin))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("agent: %q", line)
	}
	if xdpProg(t, ns, a) == 0 {
		t.Error("the agent's XDP program is not attached")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if xdpProg(t, ns, a) == 0 {
		t.Error("the killed agent's XDP program did not outlive it: its link was not pinned")
	}
	if _, err := os.Stat(filepath.Join(pin, splitStatsPin)); err != nil {
		t.Errorf("no cpumap statistics pin left to clean up: %v", err)
	}
	h := SplitHook{Netns: ns, Ifindex: a, Name: "fva"}
	if err := Cleanup(pin, []Hook{h.Hook()}); err != nil {
		t.Fatal(err)
	}
	if got := xdpProg(t, ns, a); got != 0 {
		t.Errorf("XDP program %d still attached after Cleanup", got)
	}
	if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory left after Cleanup: %v", err)
	}

	// A hung agent: its link is alive.
	d, err := Load(splitTestConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.AttachSplit(h); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup("", []Hook{h.Hook()}); err != nil {
		t.Fatal(err)
	}
	if got := xdpProg(t, ns, a); got != 0 {
		t.Errorf("XDP program %d left after Cleanup of a live link", got)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close after Cleanup: %v", err)
	}
}

// TestCheckSplitVethPeer: a veth NIC whose sending end offloads tx
// checksums is named in a note; with the offload off, nothing is said.
//
// guest: the split's checks of a veth NIC's offloads on the old kernel
func TestCheckSplitVethPeer(t *testing.T) {
	needSplit(t)
	ns, a, _ := testNetns(t)
	s, err := CheckSplit(ns, a, "fva")
	if err != nil {
		t.Fatal(err)
	}
	// Before 6.3 the kernel cannot tell whether veth has native XDP (NativeXDPKnown false).
	if !s.Veth || !s.PeerKnown || !s.PeerTxChecksum || (s.NativeXDPKnown && !s.NativeXDP) || !strings.Contains(strings.Join(s.Notes, "\n"), "ethtool -K <peer> tx off") {
		t.Errorf("veth with checksum offload on its peer: %+v", s)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "ethtool", "-K", "fvb", "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	s, err = CheckSplit(ns, a, "fva")
	if err != nil {
		t.Fatal(err)
	}
	if !s.PeerKnown || s.PeerTxChecksum || strings.Contains(strings.Join(s.Notes, "\n"), "is a veth") {
		t.Errorf("veth with checksum offload off on its peer: %+v", s)
	}
}
