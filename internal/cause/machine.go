package cause

import (
	"fmt"
	"slices"
)

// Machine is the policy over time: the agent feeds it a window at every
// turn of its loop and does what it says; a replay test feeds it recorded
// windows. It begins an engagement only where Decide has said so for a
// second without a break (one window's gap, a receiver that did not run
// in it, made its CPU look free on 2 vCPUs; before the receivers count as
// known, the second is ruled with those listed), with a second of stood-down
// windows to compare against; confirms it (Confirm);
// and, engaged, stands down once the bottleneck has been relieved of all
// pressure, or every target lost, for idleMs.
//
// It engages nothing on what it does not know: a flow's receiver counts
// as known only from a listing of the sockets made after the flow began,
// with the same CPUs for appKnownMs; until then it may run on any CPU of
// the set (decide). On 2 vCPUs a new flow's first readings named no
// receiver, the CPU it was about to run on passed for free, and every new
// flow paid an engagement (one UDP flow of 1000 B: 0.55 x vanilla). And
// it does not try again what failed: after a confirmation fails, the same
// cause (its targets) begins nothing until it changes: a new flow
// (a new socket, or traffic after newFlowQuietMs without) or a CPU freed
// (a target the failed engagement did not have); the caller's back-off
// (Replay's, the agent's retest) comes on top.
type Machine struct {
	P Params
	// state: phase, the stood-down windows kept as the baseline, the
	// engagement's bottleneck and windows, and how long it has had
	// nothing to do.
	phase   string
	base    []Window
	bn      int
	targets []int // the engagement's, at its begin
	engaged []Window
	idle    float64
	// streak: how long (ms) the verdict has said engage, with the same
	// bottleneck, without a break; a begin needs confirmMin of it.
	streak float64
	// relief: the confirmed cost per packet with steering over that
	// without (Confirmation's Cost / BaseCost).
	relief float64
	// The flow and its receivers, which Reset (a switch) leaves alone:
	// quiet, how long no traffic; listed, a listing since the flow began;
	// apps, the receivers' CPUs, known for appMs.
	quiet  float64
	listed bool
	apps   []int
	appMs  float64
	// failed: the targets of the engagement whose confirmation failed,
	// nil while none did or the cause has changed since.
	failed []int
}

// Phases and actions.
const (
	PhaseOff        = "off" // stood down (or inline): nothing moved
	PhaseConfirming = "confirming"
	PhaseEngaged    = "engaged"

	ActBegin     = "engage"     // come back on the path and steer to Targets
	ActStandDown = "stand_down" // off the path, every flow inline
)

const (
	baseKeepMs = 1500.0
	idleMs     = 1000.0
	// appKnownMs: how long a receiver's CPUs must stay the same, after a
	// listing of its socket, to count as known: the reader's memory of a
	// CPU a receiver ran on (appMemory), so that every CPU it ran on in
	// that time is among them. With the agent's listing at a flow's first
	// window, a new flow may engage 2 s after it began at the earliest. A
	// socket opened beside a running flow is listed within rescanEvery
	// (2 s); a CPU its receiver adds restarts the 2 s.
	appKnownMs = 2000.0
	// newFlowQuietMs: traffic after this long without is a new flow.
	newFlowQuietMs = 1000.0
)

// Step is one turn: the window's verdict, the confirmation while one
// runs, and what to do.
type Step struct {
	Phase   string        `json:"phase"` // after the step
	Verdict Verdict       `json:"verdict"`
	Confirm *Confirmation `json:"confirm,omitempty"`
	Action  string        `json:"action,omitempty"`
	// Fallback: the causes could not be read; the caller decides by the
	// A/B test instead.
	Fallback bool `json:"fallback,omitempty"`
}

// Phase is the machine's phase.
func (m *Machine) Phase() string {
	if m.phase == "" {
		return PhaseOff
	}
	return m.phase
}

// Feed takes one window; mayBegin says whether the caller's back-off
// allows a new engagement now. The caller reports a switch it could not
// make with Reset.
func (m *Machine) Feed(w Window, mayBegin bool) Step {
	m.see(w)
	switch m.Phase() {
	case PhaseConfirming:
		return m.confirming(w)
	case PhaseEngaged:
		return m.holding(w)
	}
	v := m.decide(w)
	s := Step{Phase: PhaseOff, Verdict: v, Fallback: !v.Readable}
	if m.failed != nil && slices.ContainsFunc(v.Targets, func(c int) bool { return !slices.Contains(m.failed, c) }) {
		m.failed = nil // a CPU freed: a new cause
	}
	m.base = keep(append(m.base, w), baseKeepMs)
	if l := m.listedVerdict(w, v); l.Engage && l.Bottleneck == m.bn {
		m.streak += w.Ms
	} else {
		m.streak, m.bn = 0, l.Bottleneck
		if l.Engage {
			m.streak = w.Ms
		}
	}
	if v.Engage && m.failed != nil {
		s.Verdict.Why += fmt.Sprintf("; not again: steering to %v did not pay, until a new flow or a CPU freed", m.failed)
	}
	if v.Engage && mayBegin && m.failed == nil && m.streak >= confirmMin && usableMs(m.base, v.Bottleneck) >= confirmMin {
		m.phase, m.bn, m.engaged, m.idle, m.targets = PhaseConfirming, v.Bottleneck, nil, 0, slices.Clone(v.Targets)
		s.Phase, s.Action = PhaseConfirming, ActBegin
	}
	return s
}

// see follows the flow and its receivers: traffic after a quiet window
// forgets the receivers' CPUs until a listing after it (the agent lists at
// once then); a new flow (a new socket, or traffic after newFlowQuietMs
// without) forgets a failed cause.
func (m *Machine) see(w Window) {
	if !Traffic(w) {
		m.quiet += w.Ms
		m.listed, m.apps, m.appMs = false, nil, 0
		return
	}
	if w.NewSockets || m.quiet >= newFlowQuietMs {
		// A new flow: a new cause. Its receiver's CPUs need not be
		// learnt again: a CPU that the listing adds restarts appMs below
		// (a listing counts a new holder at the CPU it last ran on), and
		// a web server's connections would otherwise never stay known.
		m.failed = nil
	}
	m.quiet = 0
	m.listed = m.listed || w.Listed
	switch {
	case !m.listed || len(w.AppCPUs) == 0:
		m.apps, m.appMs = nil, 0
	case slices.Equal(w.AppCPUs, m.apps):
		m.appMs += w.Ms
	default:
		m.apps, m.appMs = slices.Clone(w.AppCPUs), w.Ms
	}
}

// listedVerdict is v ruled with the receivers listed since the flow began
// taken as known: the streak's verdict. The second of agreeing turns and
// the receivers' appKnownMs then run side by side, as docs/policy.md has
// it ("2 s after it began at the earliest"), not one after the other: in
// turn, a cold flow waited 3 s, longer than a 2.5 s run, and on 16 CPUs
// a saturated NIC CPU at 64 B never saw falcon (its replay:
// TestColdSmallPackets). A begin still needs v itself to engage, the
// receivers known; with none listed, this is v.
func (m *Machine) listedVerdict(w Window, v Verdict) Verdict {
	if v.AppKnown || len(m.apps) == 0 {
		return v
	}
	return decide(w, m.P, true) // see: m.apps are w.AppCPUs here
}

// decide is Decide with the receivers known only as see says.
func (m *Machine) decide(w Window) Verdict {
	known := m.appMs >= appKnownMs
	if !known {
		w.AppCPUs = slices.Clone(m.apps) // what Why says: the listed ones only
	}
	return decide(w, m.P, known)
}

func (m *Machine) confirming(w Window) Step {
	v := m.decide(w)
	s := Step{Phase: PhaseConfirming, Verdict: v}
	if len(m.engaged) == 0 {
		// The switch's own window: neither state's.
		m.engaged = append(m.engaged, Window{})
		return s
	}
	m.engaged = append(m.engaged, w)
	c := Confirm(m.bn, m.P.Threshold, m.base, m.engaged[1:])
	s.Confirm = &c
	switch c.Outcome {
	case Pays:
		m.phase, s.Phase = PhaseEngaged, PhaseEngaged
		m.relief = min(max(c.Cost/c.BaseCost, 0.1), 1)
	case Fails:
		failed := slices.Clone(m.targets)
		m.Reset()
		m.failed = failed
		s.Phase, s.Action = PhaseOff, ActStandDown
	}
	return s
}

// holding: engaged, stand down after idleMs with no target, or with the
// bottleneck neither dropping nor pressed: relieving it is the point, so
// it counts as pressed while its busy time without steering (its busy
// time over the confirmed relief) would reach the threshold.
func (m *Machine) holding(w Window) Step {
	w.CPUs = slices.Clone(w.CPUs)
	for i := range w.CPUs {
		if w.CPUs[i].ID == m.bn {
			w.CPUs[i].Busy = min(100, w.CPUs[i].Busy/m.relief)
		}
	}
	v := m.decide(w)
	s := Step{Phase: PhaseEngaged, Verdict: v}
	if v.Readable && v.Engage {
		m.idle = 0
		return s
	}
	m.idle += w.Ms
	if m.idle >= idleMs {
		m.Reset()
		s.Phase, s.Action = PhaseOff, ActStandDown
	}
	return s
}

// Reset: back to stood down with no baseline (the windows before a switch
// are no baseline for the next).
func (m *Machine) Reset() { m.phase, m.base, m.engaged, m.idle, m.streak = PhaseOff, nil, nil, 0, 0 }

func span(ws []Window) (ms float64) {
	for _, w := range ws {
		ms += w.Ms
	}
	return ms
}

func usableMs(ws []Window, bn int) (ms float64) {
	for _, w := range ws {
		if _, ok := judge(w, bn); ok {
			ms += w.Ms
		}
	}
	return ms
}

// keep drops the oldest windows beyond limit ms.
func keep(ws []Window, limit float64) []Window {
	for len(ws) > 1 && span(ws[1:]) >= limit {
		ws = ws[1:]
	}
	return ws
}
