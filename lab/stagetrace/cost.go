package stagetrace

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Keys of NET_RX time that belongs to no device (NetnsInode 0, which no
// namespace has): polls of a CPU's backlog before their first skb, and the
// softirq's time outside every poll (bpf/lab/stagecost.c says which is which).
const (
	CostBacklog uint32 = 0
	CostOther   uint32 = 0xffffffff
)

// CostKey is one device's receive stage on one CPU.
type CostKey struct {
	NetnsInode uint32
	Ifindex    uint32 // CostBacklog or CostOther with NetnsInode 0
	CPU        int
}

// Special says which no-device key k is: "backlog", "other", or "".
func (k CostKey) Special() string {
	if k.NetnsInode != 0 {
		return ""
	}
	switch k.Ifindex {
	case CostBacklog:
		return "backlog"
	case CostOther:
		return "other"
	}
	return ""
}

// Cost is what a stage cost on a CPU, cumulative since the tracer started.
type Cost struct {
	Ns   uint64 // NET_RX softirq time charged to the stage
	SKBs uint64 // skbs delivered by the device (net:netif_receive_skb)
	Segs uint64 // their segments: a GRO super-packet counts as gso_segs
	// UntimedSegs are the Segs delivered outside a NET_RX softirq
	// (threaded NAPI, cpumap kthreads), whose time is in no Ns.
	UntimedSegs uint64
}

// CostRecord is one stage on one CPU, with the names its namespace and
// device had when the snapshot was taken ("" once gone).
type CostRecord struct {
	CostKey
	Netns, Dev string
	Cost
}

// CostSnapshot is the tracer's counters at one time.
type CostSnapshot struct {
	At      time.Time
	Records []CostRecord // sorted by namespace inode, ifindex, CPU
	// Lost counts charges that found no room in the map: Ns and Segs
	// then add up to less than what ran.
	Lost uint64
}

// Sub is what happened between prev and s: per key, s's counters less
// prev's; keys with nothing new are left out. Names are s's.
func (s CostSnapshot) Sub(prev CostSnapshot) CostSnapshot {
	old := make(map[CostKey]Cost, len(prev.Records))
	for _, r := range prev.Records {
		old[r.CostKey] = r.Cost
	}
	// Saturating: counters only grow, but a key whose entry was dropped
	// and re-made must not wrap around.
	sub := func(a, b uint64) uint64 { return a - min(a, b) }
	out := CostSnapshot{At: s.At, Lost: sub(s.Lost, prev.Lost)}
	for _, r := range s.Records {
		o := old[r.CostKey]
		r.Cost = Cost{Ns: sub(r.Ns, o.Ns), SKBs: sub(r.SKBs, o.SKBs), Segs: sub(r.Segs, o.Segs),
			UntimedSegs: sub(r.UntimedSegs, o.UntimedSegs)}
		if r.Cost != (Cost{}) {
			out.Records = append(out.Records, r)
		}
	}
	return out
}

// CostTracer times each device's receive stage in NET_RX softirqs
// (bpf/lab/stagecost.c). It pins nothing; Close removes everything.
type CostTracer struct {
	coll  *ebpf.Collection
	links []link.Link
}

// costHooks are attached in this order: softirq_entry last, so that the
// state machine starts only once every event it follows is seen, and a
// softirq already running is not timed at all.
var costHooks = []struct{ prog, tp string }{
	{stagecostProgCostSoftirqExit, "softirq_exit"},
	{stagecostProgCostNapiPoll, "napi_poll"},
	{stagecostProgCostGro, "napi_gro_receive_entry"},
	{stagecostProgCostReceive, "netif_receive_skb"},
	{stagecostProgCostSoftirqEntry, "softirq_entry"},
}

// StartCost loads and attaches the stage cost tracer. It needs BTF
// tracepoints (tp_btf, Linux 5.5).
func StartCost() (*CostTracer, error) {
	spec, err := loadStagecost()
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("stage cost tracer: load: %w", err)
	}
	t := &CostTracer{coll: coll}
	for _, h := range costHooks {
		l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[h.prog],
			AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("stage cost tracer: attach tp_btf/%s: %w", h.tp, err)
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// Snapshot reads the cumulative counters. Names are looked up now.
func (t *CostTracer) Snapshot() (CostSnapshot, error) {
	if t.coll == nil {
		return CostSnapshot{}, errors.New("stage cost tracer is closed")
	}
	s := CostSnapshot{At: time.Now()}
	var (
		k    stagecostCostKey
		vals []stagecostCostVal
	)
	it := t.coll.Maps[stagecostMapCosts].Iterate()
	for it.Next(&k, &vals) {
		for cpu, v := range vals {
			if v == (stagecostCostVal{}) {
				continue
			}
			s.Records = append(s.Records, CostRecord{CostKey: CostKey{NetnsInode: k.Netns, Ifindex: k.Ifindex, CPU: cpu},
				Cost: Cost{Ns: v.Ns, SKBs: v.Skbs, Segs: v.Segs, UntimedSegs: v.UntimedSegs}})
		}
	}
	if err := it.Err(); err != nil {
		return s, fmt.Errorf("read stage costs: %w", err)
	}
	var lost []uint64
	if err := t.coll.Maps[stagecostMapLost].Lookup(uint32(0), &lost); err != nil {
		return s, fmt.Errorf("read stage costs: %w", err)
	}
	for _, n := range lost {
		s.Lost += n
	}
	names := newResolver()
	for i := range s.Records {
		r := &s.Records[i]
		if r.Special() == "" {
			r.Netns = names.names[r.NetnsInode]
			r.Dev = names.dev(r.NetnsInode, int(r.Ifindex))
		}
	}
	sort.Slice(s.Records, func(i, j int) bool {
		a, b := s.Records[i].CostKey, s.Records[j].CostKey
		if a.NetnsInode != b.NetnsInode {
			return a.NetnsInode < b.NetnsInode
		}
		if a.Ifindex != b.Ifindex {
			return a.Ifindex < b.Ifindex
		}
		return a.CPU < b.CPU
	})
	return s, nil
}

// Close detaches every program and frees the maps.
func (t *CostTracer) Close() error {
	if t == nil || t.coll == nil {
		return nil
	}
	var errs []error
	// Reverse order: softirq_entry goes first, so no softirq starts timing
	// against a half-detached machine.
	for i := len(t.links) - 1; i >= 0; i-- {
		errs = append(errs, t.links[i].Close())
	}
	t.links = nil
	t.coll.Close()
	t.coll = nil
	return errors.Join(errs...)
}
