package datapath

import (
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/steer"
)

// The program reads the real clock, so flowlet tests use a gap long enough
// that a tight loop of test runs stays inside it, and real sleeps past it.
// Packets that happen to arrive after a gap anyway (a descheduled test) are
// skipped, not judged: nothing here asserts a duration.
const testGap = 100 * time.Millisecond

type flowletRun struct {
	h    *harness
	pkt  []byte
	last time.Time
}

// send runs one packet; inGap says whether it certainly came within the gap.
func (f *flowletRun) send() (result, bool) {
	now := time.Now()
	inGap := !f.last.IsZero() && now.Sub(f.last) < testGap/2
	r := f.h.run(HookOnOverlay, f.pkt)
	f.last = time.Now()
	return r, inGap
}

func (f *flowletRun) pause() {
	time.Sleep(testGap * 5 / 2)
	f.last = time.Time{}
}

func TestFlowletKeepsCPUWhileBusy(t *testing.T) {
	cfg := testConfig()
	cfg.CPUs = []int{0, 1, 2, 3}
	cfg.PerPacket = false
	cfg.FlowletGap = testGap
	h := newHarness(t, cfg)
	fh := tcp4.hash()
	salt := uint32(h.hooks[HookOnOverlay].NextIfindex)
	cpus := cfg.CPUs
	f := &flowletRun{h: h, pkt: frame(tcp4, pktOpts{})}

	load := make([]uint32, 4)
	h.setLoad(load, 0, true)
	r, _ := f.send()
	c1, _ := steer.Choose(fh, salt, cpus, load, 85, 0, false)
	if r.dbg.Hit != 0 || int(r.dbg.Target) != c1 {
		t.Fatalf("first packet: hit %d target %d, want a fresh choice of %d", r.dbg.Hit, r.dbg.Target, c1)
	}

	// c1 becomes busy, then everything: the flow keeps c1 while it flows.
	load[c1] = 100
	h.setLoad(load, 0, true)
	judged := 0
	for i := 0; i < 50; i++ {
		if i == 25 {
			h.setLoad(load, 100, true)
		}
		r, in := f.send()
		if !in {
			continue
		}
		judged++
		if r.dbg.Hit != 1 || int(r.dbg.Target) != c1 || r.dbg.SetHash != steer.SteerHash(fh, indexOf(cpus, c1), 4) {
			t.Fatalf("packet %d within the gap: hit %d target %d hash %#x; want CPU %d kept", i, r.dbg.Hit, r.dbg.Target, r.dbg.SetHash, c1)
		}
	}
	if judged < 10 {
		t.Skipf("only %d of 50 packets came within the gap on this busy machine", judged)
	}

	// After an idle gap the flow may move: here to the fallback (average busy).
	f.pause()
	r, _ = f.send()
	if r.dbg.Hit != 0 || steer.Kind(r.dbg.Kind) != steer.Fallback {
		t.Fatalf("after the gap: hit %d kind %v, want a fresh fallback", r.dbg.Hit, steer.Kind(r.dbg.Kind))
	}
	// ... and stays in the fallback while it flows, though load drops.
	h.setLoad(load, 0, true)
	for i := 0; i < 20; i++ {
		if r, in := f.send(); in && (r.dbg.Hit != 1 || steer.Kind(r.dbg.Kind) != steer.Fallback) {
			t.Fatalf("packet %d: hit %d kind %v, want the fallback kept", i, r.dbg.Hit, steer.Kind(r.dbg.Kind))
		}
	}
	// After the next gap: the second choice, c1 being busy.
	f.pause()
	r, _ = f.send()
	c2, kind := steer.Choose(fh, salt, cpus, load, 85, 0, false)
	if r.dbg.Hit != 0 || int(r.dbg.Target) != c2 || kind != steer.Second {
		t.Fatalf("after the second gap: hit %d target %d; want fresh second choice %d (%v)", r.dbg.Hit, r.dbg.Target, c2, kind)
	}

	cnt, err := h.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if cnt.FlowletHits == 0 || cnt.First != 1 || cnt.Second != 1 || cnt.Fallback != 1 {
		t.Errorf("counters: first %d second %d fallback %d hits %d; want 1 1 1 and hits", cnt.First, cnt.Second, cnt.Fallback, cnt.FlowletHits)
	}
}

func TestFlowletMovesWhenCPULeavesSet(t *testing.T) {
	cfg := testConfig()
	cfg.CPUs = []int{0, 1, 2, 3}
	cfg.PerPacket = false
	cfg.FlowletGap = time.Hour
	h := newHarness(t, cfg)
	h.setLoad(nil, 0, true)
	f := &flowletRun{h: h, pkt: frame(udp6, pktOpts{})}
	r, _ := f.send()
	c := int(r.dbg.Target)

	var rest []int
	for _, x := range cfg.CPUs {
		if x != c {
			rest = append(rest, x)
		}
	}
	cfg.CPUs = rest
	if err := h.d.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	r, _ = f.send()
	if r.dbg.Hit != 0 || int(r.dbg.Target) == c {
		t.Fatalf("CPU %d left the set: hit %d target %d; want a fresh choice elsewhere", c, r.dbg.Hit, r.dbg.Target)
	}
	h.checkSteer("after the set changed", r, HookOnOverlay, udp6.hash(), nil, 0, false)
}

func TestPerPacketFollowsLoad(t *testing.T) {
	cfg := testConfig()
	cfg.CPUs = []int{0, 1, 2, 3}
	cfg.PerPacket = true
	h := newHarness(t, cfg)
	fh := tcp6.hash()
	pkt := frame(tcp6, pktOpts{})
	load := make([]uint32, 4)
	h.setLoad(load, 0, true)
	r := h.run(HookOnOverlay, pkt)
	c1 := int(r.dbg.Target)
	load[c1] = 99
	h.setLoad(load, 0, true)
	r = h.run(HookOnOverlay, pkt) // immediately: the paper re-chooses per packet
	h.checkSteer("per packet, first choice busy", r, HookOnOverlay, fh, load, 0, false)
	if steer.Kind(r.dbg.Kind) != steer.Second || r.dbg.Hit != 0 {
		t.Errorf("kind %v hit %d, want second without flowlet", steer.Kind(r.dbg.Kind), r.dbg.Hit)
	}
	var k falconFlowletKey
	var v falconFlowlet
	if h.d.maps.FalconFlowlets.Iterate().Next(&k, &v) {
		t.Error("per-packet mode wrote a flowlet entry")
	}
}
