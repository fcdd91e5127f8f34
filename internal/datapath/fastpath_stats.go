package datapath

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
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
	s, err := f.Counted()
	if err != nil {
		return s, err
	}
	s.IngressEntries, s.EgressEntries, err = f.CountEntries(s.Generation)
	return s, err
}

// Counted is Stats without the entry counts, which walk both caches.
func (f *FastPath) Counted() (FastStats, error) {
	f.mu.Lock()
	s := FastStats{Counters: map[string]uint64{}, Generation: f.cfg.Gen, ShareContainer: f.cfg.ShareVeth, ShareRemote: f.cfg.ShareRemote}
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
	return s, nil
}

// CountEntries counts each cache's entries learned under generation gen.
func (f *FastPath) CountEntries(gen uint32) (ingress, egress int, err error) {
	ingress, err = countEntries(f.objs.FpIn, func(v *fastpathFpIngress) bool { return v.Gen == gen }, 0)
	if err != nil {
		return ingress, 0, err
	}
	egress, err = countEntries(f.objs.FpEg, func(v *fastpathFpEgress) bool { return v.Gen == gen }, 0)
	return ingress, egress, err
}

// Age removes entries idle for longer than idle and entries of older
// generations, and sets each tenant's tally to what it holds then; it
// returns how many it removed.
func (f *FastPath) Age(idle time.Duration) (int, error) {
	gen, cut := f.Generation(), uint64(0)
	if now := monotonicNow(); now > uint64(idle) {
		cut = now - uint64(idle) // less than idle after boot, nothing has been idle that long
	}
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
		n     int
		stale []fastpathFpKey
	)
	err := eachEntry(m, func(k *fastpathFpKey, v *V) {
		switch {
		case del >= 0 && keep(v):
			n++
		case del < 0 && !keep(v):
			stale = append(stale, *k)
		}
	})
	for _, k := range stale {
		if err := m.Delete(&k); err == nil {
			n++
		}
	}
	return n, err
}

// batchEntries: how many entries a batch of eachEntry reads.
const batchEntries = 256

// eachEntry calls fn with every entry of hash map m, read in batches
// (BPF_MAP_LOOKUP_BATCH, Linux 5.6): a system call a batch rather than two
// an entry, and a walk by hash bucket, which entries the programs evict
// meanwhile cannot send back to the first key, as they can a walk by next
// key (which then meets entries twice). A full flow cache (65 408 entries)
// took 36-40 ms to walk in batches of 256 on 2 vCPUs, 168-179 ms by key
// (TestCacheWalks logs both). Where the kernel refuses batches it walks by
// key.
func eachEntry[K, V any](m *ebpf.Map, fn func(*K, *V)) error {
	keys, vals := make([]K, batchEntries), make([]V, batchEntries)
	var cursor ebpf.MapBatchCursor
	for first := true; ; first = false {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			fn(&keys[i], &vals[i])
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil // the last batch
		case err != nil && first && n == 0 && (errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EINVAL)):
			return eachEntryByKey(m, fn)
		case err != nil:
			return err
		}
	}
}

// eachEntryByKey is eachEntry for a kernel without batches.
func eachEntryByKey[K, V any](m *ebpf.Map, fn func(*K, *V)) error {
	var (
		k K
		v V
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		fn(&k, &v)
	}
	return it.Err()
}

// SlowCounted lists, as "reason n", the slow path's reasons in counters c
// (FastCounters' names) that counted any packet.
func SlowCounted(c map[string]uint64) []string {
	var out []string
	for _, k := range FastSlowReasons() {
		if c[k] > 0 {
			out = append(out, fmt.Sprintf("%s %d", k, c[k]))
		}
	}
	return out
}
