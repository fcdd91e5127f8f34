package policy

import (
	"slices"
	"time"
)

// The adaptive policy: the decision by cause (cause.go), and for the turns
// where the causes cannot be read, the A/B test of delivered traffic (this
// file). Moving a stage to another CPU costs a backlog enqueue, an
// inter-processor interrupt and cold caches; it pays only where the CPU it
// leaves is the bottleneck and the one it reaches has room, and on some
// machines (few CPUs, a hypervisor's costly IPIs) not even then: measured
// on 2 vCPUs, no placement of the stages beat running them inline. So the
// agent measures instead of guessing. While some CPU is busy (load at or
// above the threshold) and a CPU of the set has room, it compares what the
// containers' sockets received (UDP datagrams and TCP bytes, delivered.go)
// in alternating windows with falcon steering and falcon off the path,
// stood down (A B B A: a steady trend then only counts against steering),
// and keeps steering on only if each window with it delivered more by
// engageMargin than each window without (pays); otherwise falcon stays off
// the path. Off means stood down, not attached and inline: the attached
// programs cost every packet 5–14 %, so steering that beat them by the
// margin could still lose to vanilla (measured on 2 vCPUs with the off
// windows inline: falcon+split stayed engaged through UDP stress at 0.93 ×
// vanilla).
// What the hooks pass is no measure: moving stages off a busy sender's CPU
// lets it send more while the receiver's CPU falls behind and drops
// (measured on 2 vCPUs: more bytes through the hooks, fewer delivered).
// It tests again every engagePeriod while the condition holds, and stands
// down when no CPU has been busy for engageIdle, or no CPU to steer to has
// had room as long (spells.nothingToDo): with nothing to relieve or
// nowhere to go, a hop only adds latency, and the programs cost every
// packet. Every switch moves flows under the ordering guard, so the test
// reorders nothing.
const (
	engageWindow = 150 * time.Millisecond
	engagePeriod = 10 * time.Second
	engageMargin = 0.03
	engageIdle   = time.Second
	// A verdict needs traffic: below about 1,000 packets/s over the four
	// windows, on or off makes no measurable difference, and standing down
	// on such noise would leave the next flow unsteered. Counted in
	// packets (TCP segments as received), not in the verdict's bytes: a
	// TCP ping-pong of 16 B messages at 70,000 a second is about 770 full
	// segments' worth of bytes a second, and was judged too thin to test
	// (below).
	engageMinPackets = 600
	// After a test without a verdict, the next one waits engageRetry, then
	// twice as long each time (retest): each test switches the path twice.
	engageRetry = 2 * time.Second
	// standUpCalm: stood down, a busy spell that follows this long with no
	// CPU busy is new, and tested at once.
	standUpCalm = 5 * time.Second
)

// newAdaptive: by cause, the A/B test where the causes cannot be read;
// both back off by one retest.
func newAdaptive(p Params) Policy {
	again := &retest{idle: true} // stood down from the start: the first busy spell is new
	return &firstOf{by: &byCause{p: p, again: again}, ab: &abTest{p: p, again: again}}
}

// firstOf asks by, and ab where by passes.
type firstOf struct {
	by, ab, cur Policy
}

func (f *firstOf) Turn(w Window) Verdict {
	f.cur = f.by
	if v := f.by.Turn(w); v.Action != Pass {
		return v
	}
	f.cur = f.ab
	return f.ab.Turn(w)
}

func (f *firstOf) Done(v Verdict, err error) { f.cur.Done(v, err) }

func (f *firstOf) Judge(t Test) Verdict {
	f.cur = f.ab
	return f.ab.(Tester).Judge(t)
}

func (f *firstOf) Start() error {
	if s, ok := f.by.(Starter); ok {
		return s.Start()
	}
	return nil
}

// Never: by's; where by never comes on the path it never passes to ab.
func (f *firstOf) Never() string {
	if n, ok := f.by.(Never); ok {
		return n.Never()
	}
	return ""
}

// abTest is the A/B test's side of the engagement loop.
type abTest struct {
	p     Params
	again *retest
	sp    spells
	last  time.Time // the last test began
	// The turn in flight: when, whether falcon was stood down and engaged,
	// whether a stand-down is for calm, and the test's verdict.
	now       time.Time
	down, was bool
	calm      bool
	on        bool
}

func (a *abTest) Turn(w Window) Verdict {
	someBusy, room := busyAndRoom(a.p, w.Load)
	now := w.At
	a.now, a.down = now, w.StoodDown
	if a.sp == (spells{}) {
		a.sp = spells{busy: now, roomy: now} // the spells count from the first turn
	}
	a.sp.see(now, someBusy, room)
	if a.down {
		if now.Sub(a.sp.busy) > standUpCalm {
			a.again.calm()
		}
		if !a.again.due(now) || !someBusy || !room {
			return Verdict{}
		}
		a.last = time.Time{}
	} else if !someBusy || !room {
		why, calm := a.sp.nothingToDo(now)
		if why == "" {
			return Verdict{}
		}
		a.calm = calm
		return Verdict{Action: StandDown, Why: why}
	}
	if !a.last.IsZero() && now.Sub(a.last) < engagePeriod {
		return Verdict{}
	}
	a.last = now
	a.was = !a.down && w.Engaged
	return Verdict{Action: Measure}
}

// Judge: a verdict switches to where it says (the test ends where it
// began); none tests again sooner than a period later, but not at once.
// Stood down with no wait, it tested back to back: a TCP ping-pong at
// 16 B, scored in bytes, was too thin for each of 10 tests in 10 s, and
// each switched the path twice (p99 10-15 x vanilla's, 2 vCPUs).
func (a *abTest) Judge(t Test) Verdict {
	on, ok := judge(a.p, t)
	if !ok {
		a.again.unsure(t.At)
		a.last = t.At.Add(a.again.wait - engagePeriod)
		a.saveAgain()
		return Verdict{}
	}
	a.now, a.on = t.At, on
	if on {
		return Verdict{Action: Engage}
	}
	return Verdict{Action: Disengage}
}

func (a *abTest) Done(v Verdict, err error) {
	switch {
	case v.Action == Stay:
	case err != nil:
		// StandDown: said by the actuator; a test's switch: the next
		// period tests again.
	case v.Action == StandDown && a.calm:
		a.again.calm()
	case v.Action == StandDown:
		// Full: tested when a CPU has room again, first after
		// engageRetry, then twice as long each time the load fills the
		// set again (a load that swings about the threshold must not
		// switch every second).
		a.again.unsure(a.now)
	case a.on:
		a.again.steered()
		a.saveAgain()
		if !a.was {
			a.p.Log.Info("steering engaged: the containers received more with it than without falcon")
		}
	default:
		a.again.against(a.now)
		a.saveAgain()
		if a.was || !a.down {
			a.p.Log.Info("stood down: steering did not pay, the containers received no more with it than without falcon",
				"test_again_in", a.again.wait.String())
		}
	}
}

// saveAgain records when the engagement test tests again, for status.
func (a *abTest) saveAgain() {
	at := a.again.at
	err := a.p.Save(func(e *Engagement) *Engagement {
		if e != nil {
			e.Again = at
		}
		return e
	})
	if err != nil {
		a.p.Log.Warn("engagement test: save when it tests again, for status", "err", err)
	}
}

// busyAndRoom: whether some CPU is busy (at or above the threshold), and
// whether a CPU that falcon steers to, of the set or the split set, has
// room (below it).
func busyAndRoom(p Params, load []uint32) (busy, room bool) {
	t := uint32(p.Threshold)
	for cpu, l := range load {
		busy = busy || l >= t
		room = room || (l < t && (slices.Contains(p.CPUs, cpu) || slices.Contains(p.SplitCPUs, cpu)))
	}
	return busy, room
}

// spells: when a CPU was last busy, and when a CPU falcon steers to last
// had room.
type spells struct{ busy, roomy time.Time }

func (s *spells) see(now time.Time, busy, room bool) {
	if busy {
		s.busy = now
	}
	if room {
		s.roomy = now
	}
}

// nothingToDo says why falcon, on the path, should stand down ("" where
// it should not): no CPU busy for engageIdle (calm: nothing to relieve),
// or every CPU it steers to busy as long (nothing to steer to). Full, the
// policy keeps every flow inline (the set's average is at the threshold),
// so the attached programs only cost: nginx with 200 wrk connections on
// 2 vCPUs served 0.81 x vanilla's requests with falcon on the path,
// inline, for 97 % of every window (MFLOW Fig. 11, 1 KiB files).
func (s *spells) nothingToDo(now time.Time) (why string, calm bool) {
	switch {
	case now.Sub(s.busy) > engageIdle:
		return "no CPU busy for " + engageIdle.String(), true
	case now.Sub(s.roomy) > engageIdle:
		return "no CPU to steer to with room for " + engageIdle.String(), false
	}
	return "", false
}
