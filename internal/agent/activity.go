package agent

import (
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/policy"
)

// Activity is what a running agent did that no BPF map records: its
// metrics read it along with the maps' counters.
type Activity struct {
	Samples uint64 // load samples published to the datapath
	// StaleIntervals are gaps between two samples longer than the
	// datapath's stale limit: steering was off for the length of each.
	StaleIntervals uint64
	Containers     int // container ends the agent follows
	// Spent: falcon's time on the path and engaged, and its switches;
	// Tests and ForSteering: the engagement test's verdicts, and those for
	// steering (adaptive policy); Probes: the tests begun (each switches
	// the path twice), and Thin: those that ended without a verdict for
	// too little traffic.
	Spent                            datapath.Spent
	Tests, ForSteering, Probes, Thin uint64
	// Causes: the turns decided by cause (internal/policy); Causes.Last.Seq
	// is where Agent.CauseTrace continues from.
	Causes CauseCounts
	// Fast: the fast path's packet counters so far (datapath.FastCounters'
	// names; nil where it does not run).
	Fast map[string]uint64
}

// sampling is a mode that feeds the datapath with load.
type sampling interface {
	samples() (published, stale uint64)
}

// Activity says what the agent did so far.
func (a *Agent) Activity() Activity {
	var act Activity
	if s, ok := a.mode.(sampling); ok {
		act.Samples, act.StaleIntervals = s.samples()
	}
	if m, ok := a.mode.(*falconMode); ok {
		if dp := m.loaded.Load(); dp != nil {
			act.Spent = dp.Spent()
		}
		c := &m.counters
		act.Tests, act.ForSteering = c.Tested.Load(), c.Won.Load()
		act.Probes, act.Thin = c.Probes.Load(), c.Thin.Load()
		act.Causes = m.causes.Snapshot()
	}
	if m, ok := a.mode.(fastRunner); ok {
		act.Fast = m.fastPathOf().packets()
	}
	h := a.host
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.state.Devices {
		if d.Role == discover.RoleContainer {
			act.Containers++
		}
	}
	return act
}

func (m *falconMode) samples() (published, stale uint64) { return m.published.Load(), m.stale.Load() }

// countSample counts a published sample, and a stale interval when the
// gap since the one before outlived the datapath's stale limit: the
// datapath fell back on every packet in that gap, and steering resumes now.
func (m *falconMode) countSample(h *Host, monotonicNs uint64) {
	m.published.Add(1)
	prev := m.lastSample.Swap(monotonicNs)
	limit := m.dp.Config().StaleAfter
	if gap := time.Duration(monotonicNs - prev); prev != 0 && limit > 0 && gap > limit {
		m.stale.Add(1)
		h.Log().Warn("load was stale: steering was off, and resumes", "gap", gap, "stale_after", limit)
	}
}

// CauseRecord is one turn decided by cause; CauseCounts counts them
// (internal/policy).
type (
	CauseRecord = policy.Record
	CauseCounts = policy.CauseCounts
)

// CauseTrace returns the turns decided by cause after seq that the agent
// still keeps (about the last 5 minutes); nil for a mode without them.
func (a *Agent) CauseTrace(seq uint64) []CauseRecord {
	m, ok := a.mode.(*falconMode)
	if !ok {
		return nil
	}
	out, _ := m.causes.Since(seq)
	return out
}
