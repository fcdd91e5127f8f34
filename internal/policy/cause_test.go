package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cause"
)

// TestCauseActs: an engagement by cause comes back on the path, engaged,
// with the load masked to the targets, and counts a test begun; a failed
// confirmation stands down, unmasked, counts a verdict and backs off.
func TestCauseActs(t *testing.T) {
	f := &fakeMode{down: true}
	p := f.params(0, 1)
	c := &byCause{p: p, again: &retest{}}
	e := &Engine{p: p, pol: c, mode: f}
	now := time.Now()
	step := func(s cause.Step) {
		c.rec = Record{At: now, Step: s}
		v := c.act(s)
		c.Done(v, e.apply(v))
	}
	step(cause.Step{Phase: cause.PhaseConfirming, Action: cause.ActBegin, Verdict: cause.Verdict{Targets: []int{1}}})
	if f.down || !f.engaged || p.Counters.Probes.Load() != 1 {
		t.Fatalf("begun: stood down %v, engaged %v, tests begun %d", f.down, f.engaged, p.Counters.Probes.Load())
	}
	if tg := e.Targets(); !slices.Equal(tg, []int{1}) {
		t.Errorf("targets %v", tg)
	}
	fails := &cause.Confirmation{Outcome: cause.Fails, Why: "test"}
	step(cause.Step{Phase: cause.PhaseOff, Action: cause.ActStandDown, Confirm: fails})
	if !f.down || e.Targets() != nil || p.Counters.Tested.Load() != 1 || c.again.due(now.Add(engagePeriod-time.Second)) {
		t.Errorf("failed: stood down %v, targets %v, verdicts %d, again at %s", f.down, e.Targets(), p.Counters.Tested.Load(), c.again.at.Sub(now))
	}
	if want := []string{"stand up", "steer true", "steer false", "stand down"}; !slices.Equal(f.did, want) {
		t.Errorf("did %q, want %q", f.did, want)
	}
}

// TestReplayTrace: the adaptive policy, driven by the engine through a
// recorded trace's windows (internal/cause's testdata), switches as the
// cause.Machine's own replay says: once on for a relief and never back
// off, once on and off again where steering costs more, and never on 2
// vCPUs.
func TestReplayTrace(t *testing.T) {
	for file, want := range map[string][]string{
		"relief-16cpu-synthetic.json":             {"stand up", "steer true"},
		"dearer-16cpu-synthetic.json":             {"stand up", "steer true", "steer false", "stand down"},
		"2cpu-vm-cold-udp-stress-16-run1.json":    nil,
		"2cpu-vm-bench-udp-stress-1400-run1.json": nil,
	} {
		tr, err := cause.ReadTrace("../cause/testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		f := &fakeMode{down: true} // the agent starts stood down
		p := f.params(tr.Params.Set...)
		p.Threshold = int(tr.Params.Threshold)
		e, err := New(Config{Params: p, Policy: "adaptive"}, f)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1000, 0)
		for _, w := range tr.Windows {
			now = now.Add(time.Duration(w.Ms * float64(time.Millisecond)))
			w.Engaged = f.engaged && !f.down
			e.Turn(t.Context(), Window{At: now, StoodDown: f.down, Engaged: f.engaged, Cause: &w})
		}
		if !slices.Equal(f.did, want) {
			t.Errorf("%s: did %q, want %q", file, f.did, want)
		}
	}
}
