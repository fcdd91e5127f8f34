package policy

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/cause"
)

// Deciding by cause (internal/cause): at every turn the engine reads,
// cheaply, which CPU the packet work saturates, where the receiving
// applications and the NIC's stage run, and what the containers received
// (reader.go), and a cause.Machine says whether to engage, on which CPUs,
// and whether the engagement made the bottleneck's packets cheaper. Where
// the causes cannot be read (no visible process holds the containers'
// sockets: another PID namespace; /proc unreadable), the turn passes to
// the A/B test (adaptive.go). Measured on 2 vCPUs with two container
// namespaces: a turn costs about 0.13 ms of CPU stood down (the per-CPU
// files 0.02–0.04 ms, cause.BenchmarkRead; each namespace's counters
// 0.05 ms, cause.BenchmarkReceived) and 0.29 ms on the path (the
// datapath's counters, for the NIC's CPU, 0.16 ms): 0.1–0.2 % of one CPU
// at a turn every 150 ms. Listing the sockets costs about 0.75 ms every
// 2 s.
type byCause struct {
	p       Params
	again   *retest
	machine cause.Machine
	pressed time.Time // when the bottleneck was last saturated or dropping
	engage  time.Time // when the policy started deciding
	// saidEngage, saidFallback: the last turn's verdict, to say a change.
	saidEngage, saidFallback bool
	saved                    time.Time // when the last turn went to the state file
	// never: why falcon never comes on the path (cause.Roomless), "" where
	// it may.
	never string
	// The turn in flight.
	rec Record
}

// causeSave: how often a turn that neither acts nor turns the verdict
// goes to the state file (falcon status --explain), which is written
// whole each time; a turning verdict goes at most every causeSaveTurn.
const (
	causeSave     = 10 * time.Second
	causeSaveTurn = time.Second
)

// explainKeep: the decisions that acted, kept for falcon status --explain.
const explainKeep = 8

// Start: a CPU set too small ever to hold a target never comes on the
// path, and status says so.
func (c *byCause) Start() error {
	if c.never = cause.Roomless(c.p.Set()); c.never == "" {
		return nil
	}
	c.p.Log.Info("never on the path", "why", c.never)
	return c.p.Save(func(e *Engagement) *Engagement {
		if e == nil {
			e = &Engagement{}
		}
		e.Never = c.never
		return e
	})
}

// Never: why the set can never hold a target, once Start has looked.
func (c *byCause) Never() string { return c.never }

// Turn takes one turn by cause: it passes where the causes could not be
// read, and the A/B test decides (a set too small for a target has no A/B
// test either: it would put falcon on the path to measure what cannot
// pay).
func (c *byCause) Turn(win Window) Verdict {
	if win.Cause == nil {
		return Verdict{} // the first reading only starts the window
	}
	w, now := *win.Cause, win.At
	if c.machine.P.Set == nil {
		c.machine.P = cause.Params{Threshold: float64(c.p.Threshold), Set: c.p.Set()}
		c.pressed, c.engage = now, now
	}
	var step cause.Step
	switch phase := c.machine.Phase(); {
	case w.Unreadable != "":
		// Off, the A/B test decides this turn; engaged or confirming, the
		// turn is void (the A/B test must not switch under either).
		step = cause.Step{Phase: phase, Verdict: cause.Decide(w, c.machine.P), Fallback: phase == cause.PhaseOff}
	case phase == cause.PhaseOff && !win.StoodDown:
		// On the path with nothing engaged (the start, or steering the
		// A/B test engaged): the programs only cost, so off the path once
		// there has been nothing to engage for engageIdle, or at once
		// where there is: the windows to confirm against are stood down.
		step = cause.Step{Phase: cause.PhaseOff, Verdict: cause.Decide(w, c.machine.P)}
		if step.Verdict.Engage || now.Sub(c.engage) > engageIdle {
			step.Action = cause.ActStandDown
		}
	default:
		may := c.again.idle || c.again.at.IsZero() || !now.Before(c.again.at)
		step = c.machine.Feed(w, may)
	}
	v := step.Verdict
	if v.Saturated || v.Dropping {
		c.pressed = now
	} else if win.StoodDown && now.Sub(c.pressed) > standUpCalm {
		c.again.calm() // a new busy spell is tested at once
	}
	c.rec = c.p.Causes.add(c.machine.P, Record{At: now, Window: w, Step: step})
	if w.Unreadable != "" && step.Phase == cause.PhaseOff {
		c.explain()
		if step.Fallback && c.never == "" {
			return Verdict{Action: Pass}
		}
		return Verdict{}
	}
	out := c.act(step)
	if step.Fallback && c.never == "" {
		c.explain() // act did nothing: Fallback engages nothing
		return Verdict{Action: Pass}
	}
	return out
}

// act is what the step says to do; Done counts what came of it.
func (c *byCause) act(step cause.Step) Verdict {
	v := step.Verdict
	var out Verdict
	if len(v.Targets) > 0 && step.Phase != cause.PhaseOff {
		out.Aim, out.Targets = true, slices.Clone(v.Targets)
	}
	switch step.Action {
	case cause.ActBegin:
		c.p.Counters.Probes.Add(1)
		out.Action, out.Why = Engage, "causes: "+v.Why
	case cause.ActStandDown:
		out.Action, out.Aim, out.Targets, out.Why = Disengage, true, nil, "causes: "+v.Why
		if step.Confirm != nil {
			c.p.Counters.Tested.Add(1)
			c.again.against(c.rec.At)
			out.Why = "causes: steering did not make the bottleneck's packets cheaper: " + step.Confirm.Why
		} else if step.Phase == cause.PhaseOff && c.machine.Phase() == cause.PhaseOff && !v.Saturated && !v.Dropping {
			c.again.calm()
		}
	}
	return out
}

func (c *byCause) Done(out Verdict, err error) {
	step, now := c.rec.Step, c.rec.At
	switch {
	case err != nil && out.Action == Engage:
		c.machine.Reset()
		c.again.unsure(now)
	case err != nil && out.Action == Disengage:
		c.machine.Reset()
	}
	if step.Confirm != nil && step.Confirm.Outcome == cause.Pays {
		c.p.Counters.Tested.Add(1)
		c.p.Counters.Won.Add(1)
		c.again.steered()
		c.p.Log.Info("steering engaged: the bottleneck's packets are cheaper with it", "confirm", step.Confirm.Why,
			"targets", step.Verdict.Targets)
	}
	c.explain()
}

// explain says each decision: at Info when it acts or its verdict turns,
// else at Debug; into the state file (falcon status --explain) at each
// action, at a turning verdict and every causeSave.
func (c *byCause) explain() {
	rec, now := c.rec, c.rec.At
	s, w := rec.Step, rec.Window
	level := slog.LevelDebug
	turned := s.Verdict.Engage != c.saidEngage || s.Fallback != c.saidFallback
	if s.Action != "" || (s.Confirm != nil && s.Confirm.Outcome != cause.Pending) || turned {
		level = slog.LevelInfo
	}
	c.saidEngage, c.saidFallback = s.Verdict.Engage, s.Fallback
	log := c.p.Log
	if log.Enabled(context.Background(), level) { // rec.String() is not free every turn
		log.Log(context.Background(), level, "decision by cause", "verdict", rec.String(), "phase", s.Phase, "action", s.Action, "bottleneck", s.Verdict.Bottleneck,
			"app_cpus", w.AppCPUs, "nic_cpus", w.NICCPUs, "targets", s.Verdict.Targets, "delivered", w.Delivered,
			"sock_drops", w.SockDrops, "unreadable", w.Unreadable)
	}
	if s.Action == "" && now.Sub(c.saved) < causeSave && !(turned && now.Sub(c.saved) >= causeSaveTurn) {
		return
	}
	c.saved = now
	err := c.p.Save(func(e *Engagement) *Engagement {
		if e == nil {
			e = &Engagement{}
		}
		e.Cause = &rec
		if s.Action != "" || s.Confirm != nil && s.Confirm.Outcome != cause.Pending {
			e.Decisions = append(e.Decisions, rec)
			e.Decisions = e.Decisions[max(0, len(e.Decisions)-explainKeep):]
		}
		e.Tests, e.ForSteering = c.p.Counters.Tested.Load(), c.p.Counters.Won.Load()
		return e
	})
	if err != nil {
		log.Warn("decision by cause: save it for status", "err", err)
	}
}
