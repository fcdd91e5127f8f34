package agent

import (
	"time"

	"github.com/falconnet/falcon/internal/datapath"
)

// countBudget bounds the share of time the published entry counts spend
// walking the caches: a count is redone once countBudget times its last
// walk's time has passed. Counting walks both flow caches; full (65 536
// flows each: a node with many short connections keeps them full) that
// takes about 75 ms on 2 vCPUs (datapath.TestCacheWalks), which every
// second would be 7 % of a CPU, spent when the node is busiest; within
// the budget it is 2 %. With a few thousand flows a walk takes a
// millisecond or less and the counts are redone at every publish, each
// second.
const countBudget = 50

// entryCounts are the entry counts last published, and what taking them
// cost.
type entryCounts struct {
	at     time.Time     // when they were taken
	took   time.Duration // how long that walk took
	gen    uint32        // the generation they count
	in, eg int
}

// fill sets st's entry counts: counted again where the budget allows, or
// where the generation changed (every entry of the old one went unusable
// at once), else the last ones.
func (c *entryCounts) fill(fp *datapath.FastPath, st *datapath.FastStats) error {
	if c.gen != st.Generation || time.Since(c.at) >= countBudget*c.took {
		start := time.Now()
		in, eg, err := fp.CountEntries(st.Generation)
		if err != nil {
			return err
		}
		*c = entryCounts{at: start, took: time.Since(start), gen: st.Generation, in: in, eg: eg}
	}
	st.IngressEntries, st.EgressEntries = c.in, c.eg
	return nil
}

// packets is the fast path's packet counters (datapath.FastCounters) so
// far, for the lab's runs; nil where it does not run.
func (f *fastPath) packets() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running {
		return nil
	}
	st, err := f.fp.Counted()
	if err != nil {
		return nil
	}
	return st.Counters
}

// fastRunner is a mode that may run the fast path.
type fastRunner interface{ fastPathOf() *fastPath }

func (m *fastMode) fastPathOf() *fastPath   { return &m.fast }
func (m *falconMode) fastPathOf() *fastPath { return &m.fast }
