package steer

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestHash32KnownValues(t *testing.T) {
	// murmur3 fmix32 reference values.
	for in, want := range map[uint32]uint32{0: 0, 1: 0x514e28b7, 0xffffffff: 0x81f16f39} {
		if got := Hash32(in); got != want {
			t.Errorf("Hash32(%#x) = %#x, want %#x", in, got, want)
		}
	}
}

func TestSteerHashLandsOnChosenCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 5, 7, 8, 63, 64, 100, 255, 256, 1000, 1024} {
		cpus := make([]int, n)
		for i := range cpus {
			cpus[i] = 2*i + 1
		}
		for k := 0; k < 2000; k++ {
			idx := r.IntN(n)
			if k < n {
				idx = k // every index at least once
			}
			fh := r.Uint32()
			switch k % 5 {
			case 0:
				fh = 0
			case 1:
				fh = 0xffffffff
			}
			h := SteerHash(fh, idx, n)
			if h == 0 {
				t.Fatalf("SteerHash(%#x, %d, %d) = 0", fh, idx, n)
			}
			if got := RPSCPU(h, cpus); got != cpus[idx] {
				t.Fatalf("SteerHash(%#x, %d, %d) = %#x lands on CPU %d, want %d", fh, idx, n, h, got, cpus[idx])
			}
		}
	}
}

func TestSteerHashKeepsFlowsApart(t *testing.T) {
	seen := map[uint32]bool{}
	for fh := uint32(0); fh < 1000; fh++ {
		seen[SteerHash(Hash32(fh+1), 1, 3)] = true
	}
	if len(seen) < 990 {
		t.Errorf("1000 flows steered to one CPU share only %d hashes", len(seen))
	}
}

func TestRPSCPUHashZeroMeansNoRPS(t *testing.T) {
	if got := RPSCPU(0, []int{0, 1}); got != -1 {
		t.Errorf("RPSCPU(0) = %d, want -1", got)
	}
}

func TestChoose(t *testing.T) {
	cpus := []int{0, 2, 5}
	fh := FlowHash(17, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1234, 5201)
	h1 := Hash32(fh + 7)
	first := cpus[h1%3]
	second := cpus[Hash32(h1)%3]

	load := make([]uint32, 8)
	if c, k := Choose(fh, 7, cpus, load, 85, 0, false); c != first || k != First {
		t.Errorf("idle: got %d %v, want %d first", c, k, first)
	}
	load[first] = 85
	if c, k := Choose(fh, 7, cpus, load, 85, 30, false); c != second || k != Second {
		t.Errorf("first busy: got %d %v, want %d second", c, k, second)
	}
	if c, k := Choose(fh, 7, cpus, load, 85, 85, false); c != -1 || k != Fallback {
		t.Errorf("average at threshold: got %d %v, want fallback", c, k)
	}
	if c, k := Choose(fh, 7, cpus, make([]uint32, 8), 85, 0, true); c != -1 || k != Fallback {
		t.Errorf("stale: got %d %v, want fallback", c, k)
	}
}

func TestChooseSpreadsStages(t *testing.T) {
	// One flow's stages (different next devices) land on different CPUs
	// about as often as uniform hashing predicts: 1 - 1/n.
	cpus := []int{0, 1, 2, 3}
	load := make([]uint32, 4)
	differ := 0
	const flows = 4000
	for f := uint32(0); f < flows; f++ {
		fh := Hash32(f + 12345)
		a, _ := Choose(fh, 3, cpus, load, 85, 0, false)
		b, _ := Choose(fh, 4, cpus, load, 85, 0, false)
		if a != b {
			differ++
		}
	}
	if got := float64(differ) / flows; got < 0.70 || got > 0.80 {
		t.Errorf("stages on different CPUs: %.3f of flows, want about 0.75", got)
	}
}

func TestFlowHashIdentity(t *testing.T) {
	a4, b4 := netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("192.168.1.20")
	a6, b6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	base := FlowHash(6, a4, b4, 40000, 80)
	for name, h := range map[string]uint32{
		"swapped addresses": FlowHash(6, b4, a4, 40000, 80),
		"swapped ports":     FlowHash(6, a4, b4, 80, 40000),
		"udp":               FlowHash(17, a4, b4, 40000, 80),
		"ipv6":              FlowHash(6, a6, b6, 40000, 80),
		"other sport":       FlowHash(6, a4, b4, 40001, 80),
	} {
		if h == base {
			t.Errorf("%s: same hash %#x as the base flow", name, h)
		}
	}
	if FlowHash(6, a4, b4, 40000, 80) != base {
		t.Error("FlowHash is not deterministic")
	}
}

func TestStale(t *testing.T) {
	for _, c := range []struct {
		now, updated, after uint64
		want                bool
	}{
		{100, 0, 0, false},    // staleness off
		{100, 0, 50, true},    // never written
		{100, 60, 50, false},  // 40 old
		{100, 40, 50, true},   // 60 old
		{100, 200, 50, false}, // stamped later than now
		{100, 50, 50, false},  // exactly at the limit
	} {
		if got := Stale(c.now, c.updated, c.after); got != c.want {
			t.Errorf("Stale(%d, %d, %d) = %v, want %v", c.now, c.updated, c.after, got, c.want)
		}
	}
}

func TestAvgLoad(t *testing.T) {
	load := []uint32{10, 20, 31, 100}
	for _, c := range []struct {
		cpus []int
		want uint32
	}{
		{nil, 0},
		{[]int{0}, 10},
		{[]int{0, 1}, 15},
		{[]int{1, 2}, 26}, // 25.5 rounds up
		{[]int{0, 1, 2, 3}, 40},
		{[]int{3, 9}, 50}, // CPUs without data count 0
	} {
		if got := AvgLoad(c.cpus, load); got != c.want {
			t.Errorf("AvgLoad(%v) = %d, want %d", c.cpus, got, c.want)
		}
	}
}

// TestGuardLostNeedsQuiet: missing segments are taken for lost (a counted
// timeout) only when the flow was idle at the hook for the guard timeout
// and none of its segments was counted for as long; while they still
// arrive, a slow queue holds the rest and the flow keeps its target.
func TestGuardLostNeedsQuiet(t *testing.T) {
	want := func(int) int { return 1 }
	e := Entry{Target: 0, LastSeen: 0, Sent: 10, Base: 0, Expiry: 100}
	if s := e.Guard(150, 5, 120, 1, want); !s.Held || s.Target != 0 {
		t.Fatalf("idle 150 at the hook, a segment counted 30 ago: %+v, want held on 0", s)
	}
	if s := e.Guard(400, 5, 120, 1, want); !s.Moved || !s.TimedOut || s.Target != 1 {
		t.Fatalf("idle 250, nothing counted for 280: %+v, want a timed-out move to 1", s)
	}
	// Another CPU counted one after now was read: not quiet.
	e = Entry{Target: 0, Sent: 10, Expiry: 100}
	if s := e.Guard(300, 5, 310, 1, want); !s.Held {
		t.Fatalf("a segment counted after now: %+v, want held", s)
	}
	// Unsure (made while older packets may be queued) ends the same way.
	e = Entry{Target: -1, Unsure: true, Sent: 3, Expiry: 100}
	if s := e.Guard(200, 0, 150, 1, want); !s.Held {
		t.Fatalf("unsure, a segment counted 50 ago: %+v, want held", s)
	}
	if s := e.Guard(500, 0, 150, 1, want); s.Held || s.Target != 1 {
		t.Fatalf("unsure, quiet for 300: %+v, want the move to 1", s)
	}
}

// TestMicroTurns: micro-flows of batch packets go round the split set,
// passing over a CPU at or above the threshold, and all of them when every
// CPU is busy.
func TestMicroTurns(t *testing.T) {
	cpus := []int{2, 5, 7}
	load := map[int]uint32{2: 10, 5: 90, 7: 10}
	m := Micro{Idx: 0}
	var got []int
	starts := 0
	for i := 0; i < 12; i++ {
		idx, started := m.Next(cpus, func(c int) uint32 { return load[c] }, 85, 3)
		got = append(got, cpus[idx])
		if started {
			starts++
		}
	}
	want := []int{7, 7, 7, 2, 2, 2, 7, 7, 7, 2, 2, 2}
	if fmt.Sprint(got) != fmt.Sprint(want) || starts != 4 {
		t.Errorf("CPUs %v (%d micro-flows), want %v (4)", got, starts, want)
	}
	busy := func(int) uint32 { return 100 }
	if i := NextBatchIndex(cpus, busy, 85, 2); i != 0 {
		t.Errorf("all busy: next of 2 is %d, want 0", i)
	}
	if Elephant(1250, 10_000_000, 1250, 10_000_000) != true || Elephant(1249, 10_000_000, 1250, 10_000_000) {
		t.Error("elephant verdict off at the rate")
	}
}
