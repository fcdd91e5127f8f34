package datapath

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/falconnet/falcon/internal/steer"
)

// XDP verdicts (enum xdp_action).
const (
	xdpPass     = 2
	xdpRedirect = 4
)

// needSplit skips where this kernel cannot run the split programs
// (SplitSupported says why).
func needSplit(t *testing.T) {
	t.Helper()
	if err := SplitSupported(); err != nil {
		t.Skip(err)
	}
}

// addSplit loads a split (XDP) instance salted with nic, unattached, as
// role HookSplit of the harness; the cpumap gets entries for the split set
// of the datapath's config.
func (h *harness) addSplit(nic int) {
	h.t.Helper()
	needSplit(h.t)
	d := h.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.openSplit(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.split != nil {
			d.split.close()
			d.split = nil
		}
	})
	hook := SplitHook{Ifindex: nic, Name: "lo"}.Hook()
	id, err := d.allocID()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := d.resetSlot(id); err != nil {
		h.t.Fatal(err)
	}
	if err := d.writeHook(id, hook, true); err != nil {
		h.t.Fatal(err)
	}
	p, err := d.splitProgram(id)
	if err != nil {
		h.t.Fatal(err)
	}
	h.progs[HookSplit], h.hooks[HookSplit], h.ids[HookSplit] = p, hook, id
}

// writeConfig installs cfg without touching the cpumap's entries, so that
// split sets may name CPUs this machine lacks (the decision is what is
// tested; the redirect then fails and the frame passes).
func (h *harness) writeConfig(cfg Config) {
	h.t.Helper()
	if err := cfg.Validate(); err != nil {
		h.t.Fatal(err)
	}
	b := cfg.toBPF()
	if err := h.d.maps.FalconConfig.Put(uint32(0), &b); err != nil {
		h.t.Fatal(err)
	}
	h.d.cfg.Store(&cfg)
}

// splitAvg is the average the split set is switched off by: the caller's
// when the split set is S, else the split set's own.
func splitAvg(cfg Config, load []uint32, avg uint32) uint32 {
	if len(cfg.SplitCPUs) == 0 || slices.Equal(cfg.SplitSet(), cfg.SortedCPUs()) {
		return avg
	}
	return steer.AvgLoad(cfg.SplitSet(), load)
}

// checkSplit asserts a split decision agrees with the Go twin: the choice
// over the split set salted with the NIC's ifindex; a redirect when the
// chosen CPU has a cpumap entry (the CPU the program runs on included).
func (h *harness) checkSplit(name string, r result, fh uint32, load []uint32, avg uint32, stale bool) {
	h.t.Helper()
	cfg := h.d.Config()
	if !r.steered() {
		h.t.Errorf("%s: passed untouched (verdict %d), want a decision", name, r.ret)
		return
	}
	if r.dbg.Flowhash != fh {
		h.t.Errorf("%s: flow hash %#x, want %#x", name, r.dbg.Flowhash, fh)
	}
	cpu, kind := steer.ChooseVariant(fh, uint32(h.hooks[HookSplit].NextIfindex), cfg.SplitSet(), load,
		uint32(cfg.Threshold), splitAvg(cfg, load, avg), stale, variantOf(cfg))
	if kind == steer.Fallback {
		cpu = r.cpu
	}
	if steer.Kind(r.dbg.Kind) != kind || int(r.dbg.Target) != cpu {
		h.t.Errorf("%s: XDP chose CPU %d (%v); twin: CPU %d (%v)", name, r.dbg.Target, steer.Kind(r.dbg.Kind), cpu, kind)
	}
	want := uint32(xdpPass)
	if kind != steer.Fallback && h.d.split.entries[cpu] {
		want = xdpRedirect
	}
	if r.ret != want || r.dbg.Action != want {
		h.t.Errorf("%s: verdict %d (recorded %d), want %d (CPU %d, ran on %d)", name, r.ret, r.dbg.Action, want, cpu, r.cpu)
	}
}

// TestSplitTwinAgrees: the XDP program and internal/steer make the same
// choice for random flows, split sets, loads, thresholds and staleness.
//
// guest: the split program's choice, as the old kernel's verifier and helpers run it
func TestSplitTwinAgrees(t *testing.T) {
	const flows = 12000
	cfg := testConfig()
	cfg.SplitCPUs = []int{0, 1}
	h := newHarness(t, cfg)
	h.addSplit(7)
	r := rand.New(rand.NewPCG(7, 8))
	kinds := map[steer.Kind]int{}
	redirects := 0
	for i := 0; i < flows; i++ {
		if i%100 == 0 {
			cfg = randomConfig(r)
			switch r.IntN(4) {
			case 0: // the Falcon set, the default
			case 1:
				cfg.SplitCPUs = slices.Clone(cfg.CPUs)
			default:
				cfg.SplitCPUs = r.Perm(2 + r.IntN(8))[:1+r.IntN(2)] // low ids, some with cpumap entries
			}
			h.writeConfig(cfg)
		}
		load := make([]uint32, MaxCPUs)
		for _, c := range append(cfg.SortedCPUs(), cfg.SplitSet()...) {
			load[c] = uint32(r.IntN(101))
		}
		avg := uint32(r.IntN(cfg.Threshold + 15))
		stale := cfg.StaleAfter > 0 && r.IntN(5) == 0
		if stale {
			if err := h.d.SetLoad(load, avg, 0); err != nil {
				t.Fatal(err)
			}
		} else {
			h.setLoad(load, avg, true)
		}
		h.setSalt(HookSplit, 1+r.IntN(1<<20))
		v6, outer6 := r.IntN(2) == 0, r.IntN(2) == 0
		f := flowSpec{proto: []uint8{protoTCP, protoUDP, 1}[r.IntN(3)],
			src: randomAddr(r, v6), dst: randomAddr(r, v6), sport: uint16(r.Uint32()), dport: uint16(r.Uint32())}
		pkt := vxlanFrame(randomAddr(r, outer6), randomAddr(r, outer6), DefaultVXLANPorts[r.IntN(2)],
			frame(f, pktOpts{payload: r.IntN(64), vlan: r.IntN(8) == 0}), pktOpts{})
		res := h.run(HookSplit, pkt)
		if res.dbg.Hit != 0 {
			continue // a repeated random flow within the gap: not a fresh choice
		}
		h.checkSplit(fmt.Sprintf("flow %d (%v, split %v T=%d)", i, f, cfg.SplitSet(), cfg.Threshold), res, f.hash(), load, avg, stale)
		kinds[steer.Kind(res.dbg.Kind)]++
		if res.ret == xdpRedirect {
			redirects++
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("decisions: %v, redirects %d", kinds, redirects)
	for _, k := range []steer.Kind{steer.First, steer.Second, steer.Fallback} {
		if kinds[k] < flows/20 {
			t.Errorf("only %d %v decisions: the random cases do not exercise it", kinds[k], k)
		}
	}
	if redirects == 0 {
		t.Error("no redirect: the cases never chose a CPU with a cpumap entry")
	}
}

// TestSplitParse: the XDP program passes what is not overlay traffic of the
// split protocol, for the reasons the tc program gives, and counts it.
func TestSplitParse(t *testing.T) {
	cfg := testConfig()
	cfg.SplitCPUs = []int{0}
	cfg.SplitProto = SplitTCP
	h := newHarness(t, cfg)
	h.addSplit(7)
	load := make([]uint32, MaxCPUs)
	h.setLoad(load, 0, true)

	steered := []struct {
		name string
		flow flowSpec
		pkt  []byte
	}{
		{"tcp4 in v4", tcp4, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{}), pktOpts{})},
		{"tcp6 in v6", tcp6, vxlanFrame(underlay6a, underlay6b, 8472, frame(tcp6, pktOpts{payload: 1400}), pktOpts{})},
		{"outer vlan", tcp4, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{}), pktOpts{vlan: true})},
		// beyond MAX_DIRECT_OFF: read with bpf_xdp_load_bytes
		{"deep headers", tcp6, vxlanFrame(underlay6a, underlay6b, 4789, frame(tcp6, pktOpts{v6HopOpts: true, v6HopLen: 20}), pktOpts{v6HopOpts: true, v6HopLen: 30})},
	}
	for _, c := range steered {
		h.checkSplit(c.name, h.run(HookSplit, c.pkt), c.flow.hash(), load, 0, false)
	}
	passed := []struct {
		name, reason string
		pkt          []byte
	}{
		{"udp inner, tcp split", "not_split_proto", vxlanFrame(underlay4a, underlay4b, 4789, frame(udp4, pktOpts{}), pktOpts{})},
		{"icmp inner, tcp split", "not_split_proto", vxlanFrame(underlay4a, underlay4b, 4789, frame(icmp, pktOpts{}), pktOpts{})},
		{"plain tcp", "not_vxlan", frame(tcp4, pktOpts{})},
		{"plain udp6", "not_vxlan", frame(udp6, pktOpts{})},
		{"unconfigured port", "not_vxlan", vxlanFrame(underlay4a, underlay4b, 4790, frame(tcp4, pktOpts{}), pktOpts{})},
		{"arp", "non_ip", arpFrame()},
		{"inner arp", "non_ip", vxlanFrame(underlay4a, underlay4b, 4789, arpFrame(), pktOpts{})},
		{"outer fragment", "fragment", vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{}), pktOpts{moreFrags: true})},
		{"truncated inner", "truncated", vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{})[:14+20+10], pktOpts{})},
	}
	want := map[string]uint64{}
	for _, c := range passed {
		r := h.run(HookSplit, c.pkt)
		if r.ret != xdpPass || r.steered() {
			t.Errorf("%s: verdict %d, decision %v; want XDP_PASS untouched", c.name, r.ret, steer.Kind(r.dbg.Kind))
		}
		want[c.reason]++
	}
	cnt, err := h.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var split *Stage
	for i := range cnt.Stages {
		if cnt.Stages[i].Hook.Role == HookSplit {
			split = &cnt.Stages[i]
		}
	}
	if split == nil {
		t.Fatal("no split stage in the counters")
	}
	for reason, n := range want {
		if split.Passed[reason] != n {
			t.Errorf("passed[%s] = %d, want %d", reason, split.Passed[reason], n)
		}
	}
	if got := split.First + split.Second + split.Fallback; got != uint64(len(steered)) {
		t.Errorf("decisions = %d, want %d", got, len(steered))
	}

	// Switched off: an empty split set.
	var b falconConfig
	if err := h.d.maps.FalconConfig.Lookup(uint32(0), &b); err != nil {
		t.Fatal(err)
	}
	b.SplitN = 0
	if err := h.d.maps.FalconConfig.Put(uint32(0), &b); err != nil {
		t.Fatal(err)
	}
	if r := h.run(HookSplit, steered[0].pkt); r.ret != xdpPass || r.steered() {
		t.Errorf("empty split set: verdict %d, decision %v; want XDP_PASS untouched", r.ret, steer.Kind(r.dbg.Kind))
	}
}
