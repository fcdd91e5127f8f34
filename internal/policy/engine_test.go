package policy

import (
	"slices"
	"testing"
	"time"
)

// TestABTurns: where the causes cannot be read, the A/B test decides
// through the engine. On the path with no CPU busy for engageIdle it
// stands down (calm: the next spell is tested at once); stood down with a
// CPU busy and one with room it measures, and a test that could count
// nothing (no namespace to count in) is no verdict: it backs off from
// engageRetry and switches nothing after its windows.
func TestABTurns(t *testing.T) {
	f := &fakeMode{}
	p := f.params(0, 1)
	again := &retest{idle: true}
	ab := &abTest{p: p, again: again}
	e := &Engine{p: p, pol: ab, mode: f}
	now := time.Unix(1000, 0)
	turn := func(load ...uint32) {
		now = now.Add(engageWindow)
		e.Turn(t.Context(), Window{At: now, StoodDown: f.down, Engaged: f.engaged, Load: load})
	}
	for now.Sub(time.Unix(1000, 0)) <= engageIdle+engageWindow {
		turn(10, 10)
	}
	if !slices.Equal(f.did, []string{"stand down"}) || !again.idle {
		t.Fatalf("calm on the path: did %q, retest %+v", f.did, *again)
	}
	f.did = nil
	turn(95, 10)
	if p.Counters.Probes.Load() != 1 || again.wait != engageRetry || again.idle {
		t.Errorf("tests begun %d, retest %+v, want one begun and a wait of %v", p.Counters.Probes.Load(), *again, engageRetry)
	}
	if want := []string{"steer false", "stand down"}; !slices.Equal(f.did, want) {
		t.Errorf("did %q, want %q (the first window's switch, then nothing)", f.did, want)
	}
}

// TestFreshWakesRestingSampler: stood down, the sampler parks a whole
// MaxSampleGap (a second at a 100 ms interval); Fresh has a sample
// published at once, so a comeback never starts on old load.
func TestFreshWakesRestingSampler(t *testing.T) {
	f := &fakeMode{down: true}
	e, err := New(Config{Params: f.params(0), Interval: 100 * time.Millisecond}, f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sample(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	time.Sleep(150 * time.Millisecond) // into a parked sleep
	start := time.Now()
	if !e.Fresh(2 * time.Second) {
		t.Fatal("Fresh: no sample within 2 s")
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("Fresh took %v: the resting sampler was not woken", d)
	}
}

// TestNeverTakesNoTurns: a set too small ever to hold a target is said at
// the start, and the engine then reads nothing: no load sample, and no
// turn in the causes' log after several windows; it runs until Stop.
func TestNeverTakesNoTurns(t *testing.T) {
	f := &fakeMode{down: true}
	p := f.params(0, 1)
	e, err := New(Config{Params: p, Interval: 100 * time.Millisecond}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	if f.saved == nil || f.saved.Never == "" {
		t.Fatalf("status does not say why: %+v", f.saved)
	}
	ctx, err := e.Sample()
	if err != nil {
		t.Fatal(err)
	}
	e.Run(ctx)
	time.Sleep(4 * engageWindow)
	if rs, _ := p.Causes.Since(0); len(rs) != 0 {
		t.Errorf("%d turns taken by a policy that can never come on the path", len(rs))
	}
	if n := f.loads.Load(); n != 0 || !e.Running() {
		t.Errorf("%d load samples published, running %v: want none, and running", n, e.Running())
	}
	e.Stop()
	if ctx.Err() == nil || e.Running() {
		t.Error("still running after Stop")
	}
}
