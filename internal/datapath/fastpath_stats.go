package datapath

import (
	"errors"
	"time"

	"github.com/cilium/ebpf"
)

// FastStats is what the fast path has done and holds.
type FastStats struct {
	// Counters by FastCounters' names, summed over CPUs.
	Counters map[string]uint64 `json:"counters"`
	// IngressEntries, EgressEntries: cached flows usable now (learned
	// under the current generation).
	IngressEntries int `json:"ingress_entries"`
	EgressEntries  int `json:"egress_entries"`
	// Generation counts invalidations: every change that could alter what
	// the slow path does bumps it (it starts at 1).
	Generation uint32 `json:"generation"`
	// ShareContainer, ShareRemote: the entries a local container and a
	// remote host may hold, and the pending records each may begin a
	// second (docs/fastpath.md#fairness).
	ShareContainer uint32 `json:"share_container"`
	ShareRemote    uint32 `json:"share_remote"`
}

// Stats reads the counters and counts the usable entries.
func (f *FastPath) Stats() (FastStats, error) {
	f.mu.Lock()
	gen := f.cfg.Gen
	s := FastStats{Counters: map[string]uint64{}, Generation: gen, ShareContainer: f.cfg.ShareVeth, ShareRemote: f.cfg.ShareRemote}
	f.mu.Unlock()
	var per []fastpathFpCounters
	if err := f.objs.FpStats.Lookup(uint32(0), &per); err != nil {
		return s, err
	}
	for _, c := range per {
		for i, name := range FastCounters {
			s.Counters[name] += c.N[i]
		}
	}
	var err error
	s.IngressEntries, err = countEntries(f.objs.FpIn, func(v *fastpathFpIngress) bool { return v.Gen == gen }, 0)
	if err != nil {
		return s, err
	}
	s.EgressEntries, err = countEntries(f.objs.FpEg, func(v *fastpathFpEgress) bool { return v.Gen == gen }, 0)
	return s, err
}

// Age removes entries idle for longer than idle and entries of older
// generations, and sets each tenant's tally to what it holds then; it
// returns how many it removed.
func (f *FastPath) Age(idle time.Duration) (int, error) {
	gen, cut := f.Generation(), monotonicNow()-uint64(idle)
	held := tally{}
	n1, err1 := countEntries(f.objs.FpIn, func(v *fastpathFpIngress) bool {
		if v.Gen != gen || v.UsedNs < cut {
			return false
		}
		held.add(tenantVeth, v.Ifindex)
		held.add(tenantRemote, v.Remote)
		return true
	}, -1)
	n2, err2 := countEntries(f.objs.FpEg, func(v *fastpathFpEgress) bool {
		if v.Gen != gen || v.UsedNs < cut {
			return false
		}
		held.add(tenantVeth, v.Ifindex)
		return true
	}, -1)
	if err := errors.Join(err1, err2); err != nil {
		return n1 + n2, err
	}
	return n1 + n2, f.recount(held)
}

// countEntries counts m's entries that keep says are live; with del < 0 it
// deletes the others instead and counts those.
func countEntries[V any](m *ebpf.Map, keep func(*V) bool, del int) (int, error) {
	var (
		k     fastpathFpKey
		v     V
		n     int
		stale []fastpathFpKey
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		switch {
		case del >= 0 && keep(&v):
			n++
		case del < 0 && !keep(&v):
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := m.Delete(&k); err == nil {
			n++
		}
	}
	return n, it.Err()
}
