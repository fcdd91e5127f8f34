package policy

import (
	"slices"
	"time"
)

// Test is what the A/B windows delivered, for Tester.Judge.
type Test struct {
	At time.Time // when the last window ended
	// Steering, Off: each window's score (UDP datagrams and TCP bytes in
	// 1448-byte segments) with falcon steering, and off the path.
	Steering, Off []uint64
	// Packets: the four windows' packets, which say whether there was
	// traffic enough to tell.
	Packets uint64
	// Void: a switch failed or a window could not be counted.
	Void bool
}

// judge says whether steering won the test; ok is false where there is
// no verdict (void, or too little traffic to tell). It counts and keeps
// the verdict, for the metrics and status.
func judge(p Params, t Test) (on, ok bool) {
	if t.Void {
		return false, false
	}
	carried := [2]uint64{sum(t.Off), sum(t.Steering)}
	if t.Packets < engageMinPackets {
		p.Counters.Thin.Add(1)
		return false, false // too little traffic to tell (or none: a busy CPU of other work)
	}
	on = pays(t.Steering, t.Off)
	p.Counters.Tested.Add(1)
	if on {
		p.Counters.Won.Add(1)
	}
	err := p.Save(func(e *Engagement) *Engagement {
		if e == nil {
			e = &Engagement{}
		}
		e.Tests, e.ForSteering = p.Counters.Tested.Load(), p.Counters.Won.Load()
		e.Last, e.Steering, e.Off, e.Steer = t.At, carried[1], carried[0], on
		return e
	})
	if err != nil {
		p.Log.Warn("engagement test: save its verdict for status", "err", err)
	}
	p.Log.Info("engagement test", "delivered_steering", carried[1], "delivered_off_the_path", carried[0], "steer", on)
	return on, true
}

// pays: steering won the windows only if each window with it delivered
// more, by engageMargin, than each window without it. Comparing the sums
// engaged on ties: falcon+split on one UDP flow (2 vCPUs, 3 s warm-up,
// 8 interleaved rounds) was engaged in 5 of the 8 measured runs, where it
// delivered 0.95 of vanilla on average (0.62–1.30) and lost 5–52 % of
// what the sender sent; where the two states deliver the same, the sums
// differ by the margin about as often as not, and all four windows
// agree only about once in six. A real gain shows in every window.
func pays(steering, off []uint64) bool {
	return len(steering) > 0 && len(off) > 0 &&
		float64(slices.Min(steering)) > float64(slices.Max(off))*(1+engageMargin)
}

func sum(xs []uint64) (n uint64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// retest says when falcon, stood down, tests a busy spell again. A verdict
// takes 0.6 s of one load; it must not bind a spell however long, nor
// cost a machine where steering never pays a test every period. So after
// a verdict against steering the same spell is tested again after
// engagePeriod, then twice as long each time, up to retestMax. Found on
// 16 vCPUs (results/scale-16cpu-kvm): one verdict against steering kept
// falcon off for a whole round in which its engaged rounds ran at 1.06
// and 2.33 x vanilla; before this, only a calm of standUpCalm (no CPU
// busy), which a steady load never gives, allowed another test. On 2
// vCPUs, where steering never pays, the tests cost at most 2 windows of
// 150 ms in 10 s, then less and less. A test without a verdict waits
// too (unsure), from engageRetry. The decision by cause backs off by the
// same retest.
type retest struct {
	idle bool          // stood down for want of a busy CPU: test the next spell at once
	at   time.Time     // after a verdict against or none: test again from then
	wait time.Duration // how long the last such outcome waits
}

const retestMax = 320 * time.Second

// calm: no CPU was busy for a while (or falcon stood down for want of
// one); the next busy spell is new and is tested at once.
func (r *retest) calm() { *r = retest{idle: true} }

// against: a verdict against steering at now.
func (r *retest) against(now time.Time) {
	r.wait = min(max(2*r.wait, engagePeriod), retestMax)
	r.idle, r.at = false, now.Add(r.wait)
}

// unsure: a test without a verdict at now; the waits double from
// engageRetry, and from where a verdict against left them.
func (r *retest) unsure(now time.Time) {
	r.wait = min(max(2*r.wait, engageRetry), retestMax)
	r.idle, r.at = false, now.Add(r.wait)
}

// steered: a verdict for steering; a later verdict against starts the
// waits from engagePeriod again.
func (r *retest) steered() { *r = retest{} }

// due: whether falcon, stood down, may test now.
func (r *retest) due(now time.Time) bool { return r.idle || (!r.at.IsZero() && !now.Before(r.at)) }
