package cause

import (
	"testing"
	"time"
)

// coldWindow: 4 CPUs, the NIC's CPU 0 saturated, CPUs 2 and 3 idle; the
// receiver listed on CPU 1 from window listedAt on (none named before).
func coldWindow(i, listedAt int) Window {
	w := Window{Ms: 150, Delivered: 10000, NICCPUs: []int{0},
		CPUs: cpus([]float64{100, 40, 5, 5}, []float64{90, 5, 0, 0})}
	if i >= listedAt {
		w.AppCPUs = []int{1}
		w.Listed = i == listedAt
		w.NewSockets = i == listedAt
	}
	return w
}

// A new flow whose first windows name no receiver begins nothing until
// its receiver has been known, from a listing after the flow began, for
// appKnownMs; the same windows with a receiver named all along but never
// listed since the flow began begin nothing either.
func TestNoEngagementUntilKnown(t *testing.T) {
	p := Params{Threshold: 85, Set: []int{0, 1, 2, 3}}
	m := Machine{P: p}
	const listedAt = 10
	begun := -1
	for i := range 60 {
		if s := m.Feed(coldWindow(i, listedAt), true); s.Action == ActBegin {
			begun = i
			break
		}
	}
	// The receiver known for appKnownMs from window listedAt.
	if first := listedAt + int(appKnownMs)/150 - 1; begun < first {
		t.Errorf("began at window %d, before the receiver was known for %.0f ms (window %d)", begun, appKnownMs, first)
	}
	if begun < 0 {
		t.Error("never began, with CPUs 2 and 3 free once the receiver is known")
	}
	m = Machine{P: p}
	for i := range 60 {
		w := coldWindow(i, 0)
		w.Listed, w.NewSockets = false, false
		if s := m.Feed(w, true); s.Action == ActBegin {
			t.Fatalf("began at window %d on a receiver never listed since the flow began", i)
		}
	}
}

// After a confirmation fails, the same targets begin nothing again, back
// -off or not, until a new flow (a new socket) changes the cause.
func TestFailedCauseHolds(t *testing.T) {
	flat := func(int) uint64 { return 20000 }
	tr := sim("dearer, long", 300, flat, 15000, 1.2)
	count := func(steps []Step) (begins int) {
		for _, s := range steps {
			if s.Action == ActBegin {
				begins++
			}
		}
		return begins
	}
	if n := count(tr.Replay(time.Second)); n != 1 {
		t.Errorf("%d engagements over 45 s with a 1 s back-off, want 1: the failed cause held", n)
	}
	tr.Windows[200].NewSockets, tr.Windows[200].Listed = true, true
	if n := count(tr.Replay(time.Second)); n != 2 {
		t.Errorf("%d engagements with a new flow at window 200, want 2", n)
	}
}
