package datapath

import "errors"

// Tenants of the fast path's maps (enum fp_tenant_kind, bpf/fastpath.h).
const (
	tenantVeth   = 1
	tenantRemote = 2
)

// fastShares is each tenant's share of a map of flows entries
// (docs/fastpath.md#fairness): a local container may hold a sixteenth of
// it, a remote host, whose containers share its part, a quarter. So no
// tenant can fill a map alone, and a remote host's sprayer leaves room
// for the others behind it.
func fastShares(flows uint32) (veth, remote uint32) {
	return flows / 16, flows / 4
}

// SetShares sets each tenant's share (tests set small ones).
func (f *FastPath) SetShares(veth, remote uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.ShareVeth, f.cfg.ShareRemote = veth, remote
	return f.objs.FpConf.Put(uint32(0), f.cfg)
}

// tally counts entries by tenant.
type tally map[fastpathFpTenant]int32

func (t tally) add(kind, id uint32) {
	t[fastpathFpTenant{Id: id, Kind: kind}]++
}

// recount writes what each tenant holds, as counted in t, into the
// programs' tallies, which drift when the LRU evicts an entry or two CPUs
// race (the pending records begun this second are the programs' alone).
func (f *FastPath) recount(t tally) error {
	var (
		k    fastpathFpTenant
		v    fastpathFpShare
		errs []error
	)
	seen := map[fastpathFpTenant]bool{}
	it := f.objs.FpShares.Iterate()
	for it.Next(&k, &v) {
		seen[k] = true
		if v.Entries != t[k] {
			v.Entries = t[k]
			errs = append(errs, f.objs.FpShares.Update(&k, &v, 0))
		}
	}
	errs = append(errs, it.Err())
	for k, n := range t {
		if !seen[k] {
			errs = append(errs, f.objs.FpShares.Update(&k, &fastpathFpShare{Entries: n}, 0))
		}
	}
	return errors.Join(errs...)
}
