package datapath

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/steer"
)

// arrive records n segments of flow fh reaching the last stage with the
// marks of both hooks, as guard.c does at a container's receive.
func (h *harness) arrive(fh uint32, n uint64) { h.arriveIn(fh, n, 0, 1, 2) }

// arriveIn records n segments in the given done slots only: slot 0 alone
// is an arrival no hook marked (it passed before the hooks).
func (h *harness) arriveIn(fh uint32, n uint64, slots ...int) {
	h.t.Helper()
	vals := make([]falconDone, possibleCPUs())
	if err := h.d.maps.FalconDone.Lookup(&fh, &vals); err != nil {
		vals = make([]falconDone, possibleCPUs())
	}
	for _, s := range slots {
		vals[0].C[s] += n
	}
	if err := h.d.maps.FalconDone.Put(&fh, vals); err != nil {
		h.t.Fatal(err)
	}
}

// arriveAt stamps flow fh's latest counted segment at ns (CLOCK_MONOTONIC)
// without counting one, as a segment of another slot would.
func (h *harness) arriveAt(fh uint32, ns uint64) {
	h.t.Helper()
	vals := make([]falconDone, possibleCPUs())
	if err := h.d.maps.FalconDone.Lookup(&fh, &vals); err != nil {
		vals = make([]falconDone, possibleCPUs())
	}
	vals[0].LastNs = ns
	if err := h.d.maps.FalconDone.Put(&fh, vals); err != nil {
		h.t.Fatal(err)
	}
}

// guardOnlyConfig is an engaged adaptive datapath that reconsiders every
// packet and waits for lost packets an hour: the guard alone decides.
func guardOnlyConfig() Config {
	cfg := testConfig()
	cfg.Policy = PolicyAdaptive
	cfg.Engaged = true
	cfg.PerPacket = false
	cfg.Recheck = 0
	cfg.GuardTimeout = time.Hour
	return cfg
}

// TestGuardHoldsUntilArrived: a flow whose choice changes keeps its target
// while segments it sent have not arrived at the last stage, moves once they
// have, and after an idle guard timeout moves anyway (counted).
//
// guest: the guard runs on the old kernel's tracepoint and helpers
func TestGuardHoldsUntilArrived(t *testing.T) {
	cfg := guardOnlyConfig()
	cfg.CPUs = []int{8, 9}
	h := newHarness(t, cfg)
	f := twoChoiceFlow(h)
	pkt := frame(f, pktOpts{})
	fh := f.hash()

	// Every CPU that may run the test is busy; the set is idle.
	load := make([]uint32, 10)
	for i := range 8 {
		load[i] = 100
	}
	h.setLoad(load, 0, true)
	r := h.run(HookOnOverlay, pkt)
	first := int(r.dbg.Target)
	if first != 8 && first != 9 {
		t.Fatalf("first packet went to CPU %d, want 8 or 9 (kind %v)", first, steer.Kind(r.dbg.Kind))
	}
	for range 9 {
		h.run(HookOnOverlay, pkt)
	}
	other := 17 - first

	// The target gets busy: the flow wants the other CPU but 10 segments are
	// still on their way, so it holds.
	load[first] = 100
	h.setLoad(load, 0, true)
	for i := range 5 {
		if r := h.run(HookOnOverlay, pkt); int(r.dbg.Target) != first {
			t.Fatalf("packet %d moved to %d with segments in flight", i, r.dbg.Target)
		}
	}
	h.arrive(fh, 14) // 15 sent, 14 arrived
	if r := h.run(HookOnOverlay, pkt); int(r.dbg.Target) != first {
		t.Fatalf("moved to %d with one segment in flight", r.dbg.Target)
	}
	h.arrive(fh, 2) // all 16
	if r := h.run(HookOnOverlay, pkt); int(r.dbg.Target) != other {
		t.Fatalf("all arrived: target %d, want the move to %d", r.dbg.Target, other)
	}

	// Lost packets: the other CPU gets busy too, nothing arrives; the
	// flow holds (inline would overtake) until it was idle for the timeout.
	cfg.GuardTimeout = 50 * time.Millisecond
	if err := h.d.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	load[other] = 100
	h.setLoad(load, 0, true)
	if r := h.run(HookOnOverlay, pkt); int(r.dbg.Target) != other {
		t.Fatalf("moved to %d with a segment in flight", r.dbg.Target)
	}
	// Idle at the hook for longer than the timeout, but a segment of the
	// flow was just counted at the last stage: its queues still move, so
	// the missing ones are not taken for lost.
	time.Sleep(70 * time.Millisecond)
	h.arriveAt(fh, monotonicNow())
	h.setLoad(load, 0, true)
	if r := h.run(HookOnOverlay, pkt); int(r.dbg.Target) != other {
		t.Fatalf("moved to %d while the flow's segments still arrived", r.dbg.Target)
	}
	time.Sleep(120 * time.Millisecond)
	h.setLoad(load, 0, true)
	r = h.run(HookOnOverlay, pkt)
	if steer.Kind(r.dbg.Kind) != steer.Fallback {
		t.Fatalf("after an idle timeout: kind %v target %d, want inline", steer.Kind(r.dbg.Kind), r.dbg.Target)
	}
	c, err := h.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Holds != 8 || c.Moved != 2 || c.Timeouts != 1 {
		t.Errorf("guard counters: holds %d moved %d timeouts %d, want 8 2 1", c.Holds, c.Moved, c.Timeouts)
	}
}

// twoChoiceFlow is a flow whose two hash choices at h's overlay hook
// differ over two CPUs.
func twoChoiceFlow(h *harness) flowSpec {
	f := udp4
	salt := uint32(h.hooks[HookOnOverlay].NextIfindex)
	for h1 := steer.Hash32(f.hash() + salt); h1%2 == steer.Hash32(h1)%2; h1 = steer.Hash32(f.hash() + salt) {
		f.sport++
	}
	return f
}

// TestTwinGuard replays random packet sequences, loads and arrivals through
// the BPF program and internal/steer's Entry.Guard with ChooseAdaptiveIndex
// and checks they agree packet by packet.
func TestTwinGuard(t *testing.T) {
	cfg := guardOnlyConfig()
	h := newHarness(t, cfg)
	r := rand.New(rand.NewPCG(9, 10))
	salt := uint32(h.hooks[HookOnOverlay].NextIfindex)
	cpus := cfg.SortedCPUs()
	steps := map[string]int{}
	for flow := range 40 {
		f := flowSpec{proto: protoUDP, src: randomAddr(r, false), dst: randomAddr(r, false),
			sport: uint16(r.Uint32()), dport: uint16(r.Uint32())}
		pkt, fh := frame(f, pktOpts{}), f.hash()
		var e *steer.Entry
		var done uint64
		for i := range 60 {
			load := make([]uint32, 16)
			for c := range load {
				load[c] = uint32(r.IntN(2) * 100)
			}
			h.setLoad(load, 0, true)
			if e != nil && r.IntN(3) == 0 {
				n := e.Base + e.Sent - done // everything sent arrives
				if r.IntN(2) == 0 {
					n = uint64(r.IntN(int(n) + 1))
				}
				h.arrive(fh, n)
				done += n
			}
			res := h.run(HookOnOverlay, pkt)
			cur := int(res.dbg.Cur)
			want := func(prev int) int {
				idx, _ := steer.ChooseAdaptiveIndex(fh, salt, cpus, load, uint32(cfg.Threshold), 0, false, cfg.AlwaysOn, true, cur, prev)
				return idx
			}
			got := -1
			if steer.Kind(res.dbg.Kind) != steer.Fallback {
				got = slices.Index(cpus, int(res.dbg.Target))
			}
			var st steer.Step
			if e == nil {
				s := steer.Start(0, done, 1, 0, uint64(cfg.GuardTimeout), false, true, want)
				e = &s
				st.Target = e.Target
			} else {
				st = e.Guard(0, done, 0, 1, want)
			}
			name := fmt.Sprintf("flow %d packet %d (cur %d, load %v, done %d)", flow, i, cur, load[:14], done)
			if got != st.Target {
				t.Fatalf("%s: BPF target index %d, twin %d (%+v)", name, got, st.Target, st)
			}
			switch {
			case st.Held:
				steps["held"]++
			case st.Moved:
				steps["moved"]++
			default:
				steps["kept"]++
			}
		}
	}
	t.Logf("steps: %v", steps)
	for _, k := range []string{"held", "moved", "kept"} {
		if steps[k] < 50 {
			t.Errorf("only %d %s steps: the random cases do not exercise it", steps[k], k)
		}
	}
}

// TestTwinAdaptive: the adaptive choice for fresh flows, BPF against Go.
func TestTwinAdaptive(t *testing.T) {
	cfg := testConfig()
	cfg.Policy = PolicyAdaptive
	h := newHarness(t, cfg)
	r := rand.New(rand.NewPCG(11, 12))
	kinds := map[steer.Kind]int{}
	for i := range 4000 {
		if i%100 == 0 {
			cfg = randomConfig(r)
			cfg.Policy = PolicyAdaptive
			cfg.PerPacket = true
			cfg.Engaged = r.IntN(8) != 0
			if err := h.d.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			if err := h.d.SetEngaged(cfg.Engaged); err != nil {
				t.Fatal(err)
			}
		}
		load := make([]uint32, MaxCPUs)
		for c := range 64 {
			load[c] = uint32(r.IntN(101))
		}
		for _, c := range cfg.CPUs {
			load[c] = uint32(r.IntN(101))
		}
		avg := uint32(r.IntN(cfg.Threshold + 15))
		h.setLoad(load, avg, true)
		role := HookOnOverlay
		h.setSalt(role, r.IntN(1<<20))
		f := flowSpec{proto: protoTCP, src: randomAddr(r, false), dst: randomAddr(r, false),
			sport: uint16(r.Uint32()), dport: uint16(r.Uint32())}
		res := h.run(role, frame(f, pktOpts{}))
		salt := uint32(h.hooks[role].NextIfindex)
		want, kind := steer.ChooseAdaptive(f.hash(), salt, cfg.SortedCPUs(), load, uint32(cfg.Threshold), avg, false, cfg.AlwaysOn, cfg.Engaged, int(res.dbg.Cur), -1)
		got := int(res.dbg.Target)
		if kind == steer.Fallback {
			want = int(res.dbg.Cur)
		}
		if got != want || steer.Kind(res.dbg.Kind) != kind {
			t.Fatalf("flow %d: BPF CPU %d (%v), twin %d (%v); S=%v T=%d avg %d cur %d engaged %v",
				i, got, steer.Kind(res.dbg.Kind), want, kind, cfg.SortedCPUs(), cfg.Threshold, avg, res.dbg.Cur, cfg.Engaged)
		}
		kinds[kind]++
	}
	t.Logf("decisions: %v", kinds)
	for _, k := range []steer.Kind{steer.First, steer.Second, steer.Fallback} {
		if kinds[k] < 100 {
			t.Errorf("only %d %v decisions", kinds[k], k)
		}
	}
}

// TestGuardFromFirstPacket: a flow a tc hook first sees right after its
// attach may have packets from before the hook queued, which no hook
// counted and none marked. Its first packets go inline, behind them, and
// its guard is exact from the first one: arrivals without the hook's mark
// do not release a move, the hook's own do, and nothing waits for the flow
// to pause. The twin (steer.Start, Entry.Guard) agrees at every step.
//
// guest: the guard runs on the old kernel's tracepoint and helpers
func TestGuardFromFirstPacket(t *testing.T) {
	cfg := guardOnlyConfig()
	cfg.CPUs = []int{8, 9}
	h := newHarness(t, cfg)
	h.d.clock = nil // stamp attachments now: the hook is young
	h.addHook(Hook{Ifindex: 1, Name: "lo", Role: HookOnOverlay, NextIfindex: 9})
	f := udp4
	pkt, fh := frame(f, pktOpts{}), f.hash()
	load := make([]uint32, 10)
	for i := range 8 {
		load[i] = 100
	}
	h.setLoad(load, 0, true)
	cpus := cfg.SortedCPUs()
	want := func(prev int) int {
		idx, _ := steer.ChooseAdaptiveIndex(fh, 9, cpus, load, uint32(cfg.Threshold), 0, false, cfg.AlwaysOn, true, 0, prev)
		return idx
	}
	target := func(r result) int {
		if steer.Kind(r.dbg.Kind) == steer.Fallback {
			return -1
		}
		return int(r.dbg.Target)
	}
	twin := steer.Start(0, 0, 1, 0, uint64(cfg.GuardTimeout), true, true, want)
	if r := h.run(HookOnOverlay, pkt); target(r) != -1 || twin.Target != -1 {
		t.Fatalf("first packet of a flow older than the hook: target %d kind %v (twin %d), want inline",
			target(r), steer.Kind(r.dbg.Kind), twin.Target)
	}
	for range 9 {
		if r, s := h.run(HookOnOverlay, pkt), twin.Guard(0, 0, 0, 1, want); target(r) != -1 || s.Target != -1 || !s.Held {
			t.Fatalf("before any arrival: target %d (twin %+v), want held inline", target(r), s)
		}
	}
	h.arriveIn(fh, 50, 0) // older packets, unmarked: they release nothing
	if r, s := h.run(HookOnOverlay, pkt), twin.Guard(0, 0, 0, 1, want); target(r) != -1 || s.Target != -1 {
		t.Fatalf("moved to %d (twin %d) on arrivals the hook never counted", target(r), s.Target)
	}
	h.arriveIn(fh, 11, 0, 2) // the hook's own 11, marked
	r, s := h.run(HookOnOverlay, pkt), twin.Guard(0, 11, 0, 1, want)
	if got := target(r); got != cpus[want(-1)] || !s.Moved || s.Target != want(-1) {
		t.Fatalf("all of the hook's packets arrived: target %d (twin %+v), want the move to %d", got, s, cpus[want(-1)])
	}
}
