package datapath

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/steer"
)

func mflowConfig() Config {
	cfg := testConfig()
	cfg.PerPacket = false
	cfg.SplitCPUs = []int{0, 1}
	cfg.Batch = 4
	return cfg
}

// microPackets is what the hook of role counted as micro-flow packets, and
// the micro-flows it started.
func (h *harness) microPackets(role HookRole) (pkts, started uint64) {
	h.t.Helper()
	c, err := h.d.Counters()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, s := range c.Stages {
		if s.Hook.Role == role {
			pkts += s.Micro
			started += s.MicroFlows
		}
	}
	return pkts, started
}

// TestMflowTwinAgrees: for random split sets, batch sizes and loads, the
// XDP program sends an elephant's packets to the CPUs steer.Micro names,
// packet by packet, in turns of the batch.
func TestMflowTwinAgrees(t *testing.T) {
	cfg := mflowConfig()
	h := newHarness(t, cfg)
	h.addSplit(7)
	r := rand.New(rand.NewPCG(11, 12))
	var packets, micro uint64
	for trial := 0; trial < 150; trial++ {
		cfg.Batch = 1 + r.IntN(8)
		cfg.Threshold = 50 + r.IntN(51)
		cfg.SplitCPUs = r.Perm(4 + r.IntN(8))[:1+r.IntN(4)]
		h.writeConfig(cfg)
		set := cfg.SplitSet()
		v6 := r.IntN(2) == 0
		f := flowSpec{proto: protoTCP, src: randomAddr(r, v6), dst: randomAddr(r, v6), sport: uint16(r.Uint32()), dport: 5201}
		pkt := vxlanFrame(netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("192.168.0.2"), DefaultVXLANPorts[0],
			frame(f, pktOpts{payload: 100}), pktOpts{})
		m := steer.NewMicro(f.hash())
		for i := 0; i < 3*cfg.Batch*len(set)+3; i++ {
			load := make([]uint32, MaxCPUs)
			for _, c := range set {
				load[c] = uint32(r.IntN(101))
			}
			h.setLoad(load, 0, true)
			res := h.run(HookSplit, pkt)
			idx, started := m.Next(set, func(c int) uint32 { return load[c] }, uint32(cfg.Threshold), uint64(cfg.Batch))
			packets++
			if started {
				micro++
			}
			if int(res.dbg.Target) != set[idx] || res.dbg.Flowhash != f.hash() {
				t.Fatalf("trial %d packet %d (split %v, batch %d, loads %v): XDP sent it to CPU %d, twin to %d",
					trial, i, set, cfg.Batch, load[:10], res.dbg.Target, set[idx])
			}
		}
	}
	pkts, started := h.microPackets(HookSplit)
	if pkts != packets || started != micro {
		t.Errorf("counted %d micro-flow packets in %d micro-flows, want %d in %d", pkts, started, packets, micro)
	}
}

// TestMflowWhichFlows: only elephants of a split protocol go in micro-flows
// (UDP only with ReorderUDP), a flow becomes one after two windows in a
// row at the elephant rate (one is a burst), stops being one after a window
// below it, and the tc hooks then leave its packets inline (hash 0) instead
// of choosing a CPU per flow.
func TestMflowWhichFlows(t *testing.T) {
	cfg := mflowConfig()
	cfg.ElephantBps = 8000 // 10 bytes a window: any packet after the first window
	h := newHarness(t, cfg)
	h.addSplit(7)
	h.setLoad(make([]uint32, MaxCPUs), 0, true)
	p := mflowProbe{h}

	h.run(HookSplit, p.outer(tcp4))
	if n := p.micro(); n != 0 {
		t.Fatalf("a flow's first packet went in a micro-flow (%d): no window has measured its rate yet", n)
	}
	p.nextWindow(tcp4)
	if n := p.micro(); n != 0 {
		t.Fatalf("after one window at the elephant rate: %d micro-flow packets, want none (it may be a burst)", n)
	}
	p.nextWindow(tcp4)
	if n := p.micro(); n != 1 {
		t.Fatalf("after two windows at the elephant rate: %d micro-flow packets, want 1", n)
	}
	// The tc hooks see an elephant: inline, no decision.
	for _, role := range []HookRole{HookOnNIC, HookOnOverlay} {
		pkt := p.outer(tcp4)
		if role == HookOnOverlay {
			pkt = frame(tcp4, pktOpts{payload: 100})
		}
		res := h.run(role, pkt)
		if res.steered() || res.dbg.SetHash != 0 || res.dbg.SkbHash != 0 {
			t.Errorf("%v hook: decision %+v on an elephant's packet, want inline with hash 0", role, res.dbg)
		}
		if n, _ := h.microPackets(role); n != 1 {
			t.Errorf("%v hook counted %d micro-flow packets, want 1", role, n)
		}
	}

	// A pause: the window that ends with it (one packet in 30 windows'
	// time) is below the rate, and one window at it after the pause is not
	// enough to be an elephant again.
	before := p.micro()
	time.Sleep(30 * MflowWindow)
	h.run(HookSplit, p.outer(tcp4))
	p.nextWindow(tcp4)
	if n := p.micro(); n != before {
		t.Fatalf("after a pause and one window at the rate: %d micro-flow packets, want none", n-before)
	}
	p.nextWindow(tcp4)
	if n := p.micro(); n != before+1 {
		t.Fatalf("after a pause and two windows at the rate: %d micro-flow packets, want 1", n-before)
	}
	p.udpAndMice(t, cfg)
}

// mflowProbe sends packets through a harness's split hook and counts its
// micro-flow packets.
type mflowProbe struct{ h *harness }

func (p mflowProbe) outer(f flowSpec) []byte {
	return vxlanFrame(netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("192.168.0.2"), DefaultVXLANPorts[0],
		frame(f, pktOpts{payload: 100}), pktOpts{})
}

func (p mflowProbe) micro() uint64 { n, _ := p.h.microPackets(HookSplit); return n }

// nextWindow sends one packet of f after a window: a window at the
// elephant rate, whose bytes are that one packet.
func (p mflowProbe) nextWindow(f flowSpec) {
	time.Sleep(MflowWindow + 2*time.Millisecond)
	p.h.run(HookSplit, p.outer(f))
}

// udpAndMice: a UDP elephant is split only with ReorderUDP; a mouse, far
// below the rate, never; nor anything while draining.
func (p mflowProbe) udpAndMice(t *testing.T, cfg Config) {
	t.Helper()
	h := p.h
	h.run(HookSplit, p.outer(udp4))
	before := p.micro()
	p.nextWindow(udp4)
	p.nextWindow(udp4)
	if n := p.micro(); n != before {
		t.Errorf("a UDP elephant went in a micro-flow without ReorderUDP")
	}
	cfg.ReorderUDP = true
	h.writeConfig(cfg)
	h.run(HookSplit, p.outer(udp4)) // first seen now: no rate yet
	p.nextWindow(udp4)
	p.nextWindow(udp4)
	if n := p.micro(); n != before+1 {
		t.Errorf("with ReorderUDP: %d micro-flow packets, want %d", n, before+1)
	}

	cfg.ElephantBps = 1_000_000_000
	h.writeConfig(cfg)
	mouse := flowSpec{protoTCP, netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.8"), 40001, 5201}
	before = p.micro()
	for i := 0; i < 3; i++ {
		h.run(HookSplit, p.outer(mouse))
		time.Sleep(MflowWindow + 2*time.Millisecond)
	}
	if n := p.micro(); n != before {
		t.Errorf("a mouse went in %d micro-flow packets", n-before)
	}
	cfg.Draining = true
	h.writeConfig(cfg)
	h.run(HookSplit, p.outer(tcp4))
	if n := p.micro(); n != before {
		t.Errorf("draining: an elephant still went in a micro-flow")
	}
}

// TestMflowConfigRoundTrip: the micro-flow settings survive the trip
// through the BPF config, the rate to within a window's byte.
func TestMflowConfigRoundTrip(t *testing.T) {
	for _, bps := range []uint64{0, 8000, 1_000_000_000, 123_456_789} {
		cfg := mflowConfig()
		cfg.ElephantBps, cfg.ReorderUDP, cfg.Batch = bps, true, 256
		b := cfg.toBPF()
		back := configFromBPF(&b)
		if back.Batch != 256 || !back.ReorderUDP || back.ElephantBps < bps || back.ElephantBps > bps+800 {
			t.Errorf("%d bit/s: back as batch %d, reorder %v, %d bit/s", bps, back.Batch, back.ReorderUDP, back.ElephantBps)
		}
	}
	for _, bad := range []Config{{Batch: -1}, {Batch: MaxBatch + 1}, {ElephantBps: 1 << 50}} {
		cfg := mflowConfig()
		cfg.Batch, cfg.ElephantBps = bad.Batch, bad.ElephantBps
		if err := cfg.Validate(); err == nil {
			t.Errorf("batch %d, elephant %d: valid", bad.Batch, bad.ElephantBps)
		}
	}
}
