package agent

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/cause"
)

// causeLoop is the engagement loop's state for deciding by cause.
type causeLoop struct {
	reader  causeReader
	machine cause.Machine
	pressed time.Time // when the bottleneck was last saturated or dropping
	engage  time.Time // when the agent started deciding by cause
	// saidEngage, saidFallback: the last turn's verdict, to say a change.
	saidEngage, saidFallback bool
	saved                    time.Time // when the last turn went to the state file
}

// decideByCause: false decides by the A/B test alone, for the tests of its
// switches (on 2 vCPUs the causes never engage, so never switch).
var decideByCause = true

// causeSave: how often a turn that neither acts nor turns the verdict
// goes to the state file (falcon status --explain), which is written
// whole each time; a turning verdict goes at most every causeSaveTurn.
const (
	causeSave     = 10 * time.Second
	causeSaveTurn = time.Second
)

// byCause takes one turn of the engagement loop by cause; false where the
// causes could not be read, and the caller decides by the A/B test.
func (m *falconMode) byCause(h *Host, c *causeLoop, again *retest) bool {
	w, ok := c.reader.read(m)
	if !ok {
		return true // the first reading only starts the window
	}
	now := time.Now()
	if c.machine.P.Set == nil {
		c.machine.P = cause.Params{Threshold: float64(h.Opts.Threshold), Set: m.causeSet(h)}
		c.pressed, c.engage = now, now
	}
	down := m.dp.Config().StoodDown
	var step cause.Step
	switch phase := c.machine.Phase(); {
	case w.Unreadable != "":
		// Off, the A/B test decides this turn; engaged or confirming, the
		// turn is void (the A/B test must not switch under either).
		step = cause.Step{Phase: phase, Verdict: cause.Decide(w, c.machine.P), Fallback: phase == cause.PhaseOff}
	case phase == cause.PhaseOff && !down:
		// On the path with nothing engaged (the start, or steering the
		// A/B test engaged): the programs only cost, so off the path once
		// there has been nothing to engage for engageIdle, or at once
		// where there is: the windows to confirm against are stood down.
		step = cause.Step{Phase: cause.PhaseOff, Verdict: cause.Decide(w, c.machine.P)}
		if step.Verdict.Engage || now.Sub(c.engage) > engageIdle {
			step.Action = cause.ActStandDown
		}
	default:
		may := again.idle || again.at.IsZero() || !now.Before(again.at)
		step = c.machine.Feed(w, may)
	}
	v := step.Verdict
	if v.Saturated || v.Dropping {
		c.pressed = now
	} else if down && now.Sub(c.pressed) > standUpCalm {
		again.calm() // a new busy spell is tested at once
	}
	rec := m.causes.add(c.machine.P, CauseRecord{At: now, Window: w, Step: step})
	if w.Unreadable == "" || step.Phase != cause.PhaseOff {
		m.act(h, c, step, again, now)
	}
	m.explain(h, c, rec, now)
	return !step.Fallback
}

// act does what the step says, and counts it.
func (m *falconMode) act(h *Host, c *causeLoop, step cause.Step, again *retest, now time.Time) {
	v := step.Verdict
	if len(v.Targets) > 0 && step.Phase != cause.PhaseOff {
		t := slices.Clone(v.Targets)
		m.targets.Store(&t)
	}
	switch step.Action {
	case cause.ActBegin:
		m.probes.Add(1)
		if err := m.onPath(h, true, "causes: "+v.Why); err != nil {
			m.targets.Store(nil)
			c.machine.Reset()
			again.unsure(now)
		}
	case cause.ActStandDown:
		m.targets.Store(nil)
		why := "causes: " + v.Why
		if step.Confirm != nil {
			m.tested.Add(1)
			again.against(now)
			why = "causes: steering did not make the bottleneck's packets cheaper: " + step.Confirm.Why
		} else if step.Phase == cause.PhaseOff && c.machine.Phase() == cause.PhaseOff && !v.Saturated && !v.Dropping {
			again.calm()
		}
		if m.onPath(h, false, why) != nil {
			c.machine.Reset()
		}
	}
	if step.Confirm != nil && step.Confirm.Outcome == cause.Pays {
		m.tested.Add(1)
		m.won.Add(1)
		again.steered()
		h.Log().Info("steering engaged: the bottleneck's packets are cheaper with it", "confirm", step.Confirm.Why,
			"targets", v.Targets)
	}
}

// explain says each decision: at Info when it acts or its verdict turns,
// else at Debug; into the state file (falcon status --explain) at each
// action, at a turning verdict and every causeSave.
func (m *falconMode) explain(h *Host, c *causeLoop, rec CauseRecord, now time.Time) {
	s, w := rec.Step, rec.Window
	level := slog.LevelDebug
	turned := s.Verdict.Engage != c.saidEngage || s.Fallback != c.saidFallback
	if s.Action != "" || (s.Confirm != nil && s.Confirm.Outcome != cause.Pending) || turned {
		level = slog.LevelInfo
	}
	c.saidEngage, c.saidFallback = s.Verdict.Engage, s.Fallback
	if h.Log().Enabled(context.Background(), level) { // rec.String() is not free every turn
		h.Log().Log(context.Background(), level, "decision by cause", "verdict", rec.String(), "phase", s.Phase, "action", s.Action, "bottleneck", s.Verdict.Bottleneck,
			"app_cpus", w.AppCPUs, "nic_cpus", w.NICCPUs, "targets", s.Verdict.Targets, "delivered", w.Delivered,
			"sock_drops", w.SockDrops, "unreadable", w.Unreadable)
	}
	if s.Action == "" && now.Sub(c.saved) < causeSave && !(turned && now.Sub(c.saved) >= causeSaveTurn) {
		return
	}
	c.saved = now
	err := h.update(func(st *State) {
		if st.Engagement == nil {
			st.Engagement = &Engagement{}
		}
		e := st.Engagement
		e.Cause = &rec
		if s.Action != "" || s.Confirm != nil && s.Confirm.Outcome != cause.Pending {
			e.Decisions = append(e.Decisions, rec)
			e.Decisions = e.Decisions[max(0, len(e.Decisions)-explainKeep):]
		}
		e.Tests, e.ForSteering = m.tested.Load(), m.won.Load()
	})
	if err != nil {
		h.Log().Warn("decision by cause: save it for status", "err", err)
	}
}

// explainKeep: the decisions that acted, kept for falcon status --explain.
const explainKeep = 8

// causeSet: the CPUs a stage may move to, the set and the split set.
func (m *falconMode) causeSet(h *Host) []int {
	set := slices.Clone(h.Opts.CPUs)
	for _, c := range h.Opts.SplitCPUs {
		if !slices.Contains(set, c) {
			set = append(set, c)
		}
	}
	slices.Sort(set)
	return set
}
