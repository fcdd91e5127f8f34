package policy

import (
	"testing"
	"time"
)

// Steering pays only when every window with it beats every window
// without it by the margin: a tie that the sums would call a win is not.
func TestPays(t *testing.T) {
	for _, c := range []struct {
		steering, off []uint64
		want          bool
	}{
		{[]uint64{1100, 1120}, []uint64{1000, 1010}, true},
		{[]uint64{1040, 1200}, []uint64{1000, 1020}, false}, // the sums differ by 10 %, one window by 2 %
		{[]uint64{1300, 990}, []uint64{1000, 1000}, false},  // a window lost
		{[]uint64{1030, 1030}, []uint64{1000, 1000}, false}, // exactly the margin
		{[]uint64{1031, 1040}, []uint64{1000, 1000}, true},
		{[]uint64{1031}, nil, false},
		{nil, []uint64{1}, false},
	} {
		if got := pays(c.steering, c.off); got != c.want {
			t.Errorf("pays(%v, %v) = %v, want %v", c.steering, c.off, got, c.want)
		}
	}
}

// TestRetest: stood down after a verdict against steering, falcon tests the
// same busy spell again after engagePeriod, then twice as long each time up
// to retestMax; a calm spell or a verdict for steering starts afresh.
func TestRetest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r retest
	if r.due(t0) {
		t.Fatal("due before any verdict or calm")
	}
	r.calm()
	if !r.due(t0) {
		t.Fatal("a new spell after calm is not tested at once")
	}
	now := waits(t, &r, t0, "against", r.against, 10, 20, 40, 80, 160, 320, 320, 320)
	r.steered()
	r.against(now)
	if r.wait != engagePeriod {
		t.Errorf("after a verdict for steering the next wait is %v, want %v", r.wait, engagePeriod)
	}
	r.calm()
	if !r.due(now) || r.wait != 0 {
		t.Errorf("calm: due %v, wait %v", r.due(now), r.wait)
	}
	// Tests without a verdict wait too, from engageRetry, even right
	// after a calm: stood down, they ran back to back before.
	now = waits(t, &r, now, "without a verdict", r.unsure, 2, 4, 8, 16, 32, 64, 128, 256, 320)
	r.steered()
	r.unsure(now)
	if r.wait != engageRetry {
		t.Errorf("after a verdict for steering, a test without one waits %v, want %v", r.wait, engageRetry)
	}
}

// waits gives r one outcome after another, each when the wait before ran
// out, and wants each wait (s) in turn: not due a moment before, due at
// its end. It returns the time of the last.
func waits(t *testing.T, r *retest, now time.Time, what string, outcome func(time.Time), want ...time.Duration) time.Time {
	t.Helper()
	for i, w := range want {
		outcome(now)
		if r.wait != w*time.Second || r.due(now.Add(r.wait-time.Millisecond)) || !r.due(now.Add(r.wait)) {
			t.Fatalf("%s, outcome %d: wait %v (due a moment before: %v), want %v s", what, i+1, r.wait,
				r.due(now.Add(r.wait-time.Millisecond)), w)
		}
		now = now.Add(r.wait)
	}
	return now
}

// On the path, falcon stands down after engageIdle with no CPU busy
// (calm) or with no CPU to steer to that has room (full), not before, and
// not while both a busy CPU and one with room are seen.
func TestNothingToDo(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name       string
		busy, room bool
		calm       bool
		stand      bool
	}{
		{"busy, room", true, true, false, false},
		{"calm", false, true, true, true},
		{"full", true, false, false, true},
	} {
		sp := spells{busy: t0, roomy: t0}
		for now := t0; now.Sub(t0) <= engageIdle+engageWindow; now = now.Add(engageWindow) {
			sp.see(now, c.busy, c.room)
			why, calm := sp.nothingToDo(now)
			if want := c.stand && now.Sub(t0) > engageIdle; (why != "") != want || (want && calm != c.calm) {
				t.Errorf("%s after %v: %q, calm %v", c.name, now.Sub(t0), why, calm)
			}
		}
	}
}
