package datapath

import (
	"runtime"
	"testing"

	"github.com/falconnet/falcon/internal/steer"
)

// Each decision is counted on the CPU the hook ran on when it made it, and
// a hook's totals are the sum over its CPUs: the metrics' cpu label and
// falcon status's per-hook numbers must not disagree.
//
// guest: the per-CPU counters the program keeps, read back on the old kernel
func TestCountersPerCPU(t *testing.T) {
	h := newHarness(t, testConfig())
	onCPU := pinnedThread(t)

	want := map[int]Decided{}
	pkt := frame(tcp4, pktOpts{})
	for i := 0; i < 40; i++ {
		onCPU(i % runtime.NumCPU())
		// Under the threshold the first choice, over it inline.
		h.setLoad(nil, uint32(i%3)*50, true)
		r := h.run(HookOnOverlay, pkt)
		d := want[r.cpu]
		switch steer.Kind(r.dbg.Kind) {
		case steer.First:
			d.First++
		case steer.Second:
			d.Second++
		case steer.Fallback:
			d.Fallback++
		default:
			t.Fatalf("packet %d: not decided on (kind %d)", i, r.dbg.Kind)
		}
		want[r.cpu] = d
	}
	if len(want) < min(2, runtime.NumCPU()) {
		t.Fatalf("the hook ran on %d CPUs only", len(want))
	}

	c, err := h.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var s *Stage
	for i := range c.Stages {
		if c.Stages[i].Hook.Role == HookOnOverlay {
			s = &c.Stages[i]
		}
	}
	if s == nil {
		t.Fatal("no overlay hook in the counters")
	}
	var sum Decided
	for cpu, d := range s.PerCPU {
		if d != want[cpu] {
			t.Errorf("CPU %d: %+v, want %+v", cpu, d, want[cpu])
		}
		sum.add(d)
	}
	for cpu := range want {
		if _, ok := s.PerCPU[cpu]; !ok {
			t.Errorf("CPU %d decided %+v but is not in PerCPU", cpu, want[cpu])
		}
	}
	if sum != s.Decided || s.First == 0 || s.Fallback == 0 {
		t.Errorf("hook totals %+v, sum over CPUs %+v (want both first and fallback decisions)", s.Decided, sum)
	}
}
