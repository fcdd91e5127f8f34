package stagetrace

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// Snapshot reads the counters so far, one Record per (namespace, device,
// flow), sorted by stage then flow. Namespace and device names are looked
// up now, so devices gone since show by index only.
func (t *Tracer) Snapshot() ([]Record, error) {
	if t.coll == nil {
		return nil, errors.New("stage tracer is closed")
	}
	if t.names == nil {
		t.names = newResolver()
	}
	var (
		k    stagetraceStageKey
		vals []stagetraceStageVal
		out  []Record
	)
	it := t.coll.Maps[stagetraceMapStages].Iterate()
	for it.Next(&k, &vals) {
		r := Record{NetnsInode: k.Netns, Ifindex: int(k.Ifindex), Flow: flowFromBPF(k.Flow),
			PerCPU: map[int]uint64{}, SkbsPerCPU: map[int]uint64{}}
		for cpu, v := range vals {
			if v.Skbs > 0 {
				r.PerCPU[cpu] = v.Packets
				r.SkbsPerCPU[cpu] = v.Skbs
			}
			if v.DataSegs > 0 {
				if r.DataSegsPerCPU == nil {
					r.DataSegsPerCPU, r.JumpsPerCPU = map[int]uint64{}, map[int]uint64{}
				}
				r.DataSegsPerCPU[cpu] = v.DataSegs
				r.JumpsPerCPU[cpu] = v.Jumps
			}
		}
		out = append(out, r)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read stage counters: %w", err)
	}
	for i := range out {
		r := &out[i]
		r.Netns = t.names.names[r.NetnsInode]
		r.Dev = t.names.dev(r.NetnsInode, r.Ifindex)
	}
	// Names are cached per snapshot only: namespaces and devices come and go.
	t.names = nil
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if sa, sb := a.Stage(), b.Stage(); sa != sb {
			return sa < sb
		}
		return a.Flow.String() < b.Flow.String()
	})
	return out, nil
}

// SeqRecord is the order seen by one flow at the sequence device
// (Options.Seq). For TCP the packets are data segments and the
// sequence numbers IPv4 IDs, MaxSeq the ID expected next, extended to 64
// bits from 2^32 up.
type SeqRecord struct {
	Flow      Flow
	Seen      uint64 // packets with a readable sequence number
	Reordered uint64 // packets below the highest sequence number before them
	MaxSeq    uint64
	// First is the first reordered packet, where Reordered > 0.
	First *Inversion
}

// Inversion is a packet that came after one sent later: on which CPU it
// and the packet before it were handled, how many sequence numbers it was
// behind, when (CLOCK_MONOTONIC) and how long after the packet before.
type Inversion struct {
	CPU      int           `json:"cpu"`
	PrevCPU  int           `json:"prev_cpu"`
	Task     string        `json:"task"` // the task each ran in (a cpumap kthread, ksoftirqd, …)
	PrevTask string        `json:"prev_task"`
	Behind   uint64        `json:"behind"`
	At       time.Duration `json:"at_ns"`
	Gap      time.Duration `json:"gap_ns"`
	// TCP with Options.SeqPaths: the IPv4 IDs of the two and their ways
	// through the devices (those the tracer counts), oldest hop first.
	ID       uint16 `json:"id,omitempty"`
	PrevID   uint16 `json:"prev_id,omitempty"`
	Path     []Hop  `json:"path,omitempty"`
	PrevPath []Hop  `json:"prev_path,omitempty"`
}

// Hop is a device a segment crossed: its stage ("netns/dev"), the CPU and
// when (CLOCK_MONOTONIC).
type Hop struct {
	Stage string        `json:"stage"`
	CPU   int           `json:"cpu"`
	At    time.Duration `json:"at_ns"`
	// What told the skb apart there: its hash, its XDP metadata's first
	// 4 bytes (MetaLen bytes in all), a tunnel's outer UDP source port and
	// the outer TOS.
	Hash       uint32 `json:"hash"`
	Meta       uint32 `json:"meta"`
	MetaLen    int    `json:"meta_len"`
	OuterSport uint16 `json:"outer_sport"`
	TOS        uint8  `json:"tos"`
}

// String tells where the reordered packet and the one before it ran and,
// where recorded, their ways, hop times counted from the inversion.
func (inv *Inversion) String() string {
	s := fmt.Sprintf("on CPU %d (%s), %d behind, %s after the packet before it on CPU %d (%s)",
		inv.CPU, inv.Task, inv.Behind, inv.Gap, inv.PrevCPU, inv.PrevTask)
	if inv.Path == nil && inv.PrevPath == nil {
		return s
	}
	way := func(p []Hop) string {
		hops := make([]string, len(p))
		for i, h := range p {
			hops[i] = fmt.Sprintf("%s CPU %d %v (hash %#x", h.Stage, h.CPU, h.At-inv.At, h.Hash)
			if h.MetaLen > 0 {
				hops[i] += fmt.Sprintf(", meta %d B %#x", h.MetaLen, h.Meta)
			}
			if h.OuterSport != 0 {
				hops[i] += fmt.Sprintf(", outer sport %d tos %#x", h.OuterSport, h.TOS)
			}
			hops[i] += ")"
		}
		return strings.Join(hops, " -> ")
	}
	return fmt.Sprintf("%s; its way (ID %d): %s; the one before it (ID %d): %s", s, inv.ID, way(inv.Path), inv.PrevID, way(inv.PrevPath))
}

// Reordering reads the per-flow order counters of the sequence device
// (Options.Seq); empty when none was given.
func (t *Tracer) Reordering() ([]SeqRecord, error) {
	if t.coll == nil {
		return nil, errors.New("stage tracer is closed")
	}
	var (
		k   stagetraceFlow
		v   stagetraceSeqVal
		out []SeqRecord
	)
	it := t.coll.Maps[stagetraceMapSeqs].Iterate()
	for it.Next(&k, &v) {
		r := SeqRecord{Flow: flowFromBPF(k), Seen: v.Seen, Reordered: v.Reordered, MaxSeq: v.MaxSeq}
		if v.Reordered > 0 {
			r.First = &Inversion{CPU: int(v.InvCpu), PrevCPU: int(v.InvPrevCpu), Behind: uint64(v.InvBehind),
				Task: comm(v.InvComm), PrevTask: comm(v.InvPrevComm), At: time.Duration(v.InvNs), Gap: time.Duration(v.InvGapNs),
				ID: uint16(v.InvId), PrevID: uint16(v.InvPrevId), Path: t.hops(v.InvPath), PrevPath: t.hops(v.InvPrevPath)}
		}
		out = append(out, r)
	}
	t.names = nil
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read order counters: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Flow.String() < out[j].Flow.String() })
	return out, nil
}

// Stats are the program's own counters, summed over CPUs.
type Stats struct {
	Seen      uint64 // skbs the tracepoint handed over
	Counted   uint64 // skbs that passed the filters and were counted
	NotIP     uint64
	Truncated uint64 // headers not readable from the linear data
	MapFull   uint64 // skbs lost for want of room: raise MaxFlows
	SeqShort  uint64 // UDP at a sequence device without 8 payload bytes, TCP without a readable IP ID
	// Missed counts the runs the kernel skipped because a BPF program was
	// already running on that CPU: packets it never showed the tracer.
	Missed uint64
	// RunCount and RunTime add up the program's runs while BPF run-time
	// statistics are on (kernel.bpf_stats_enabled or ebpf.EnableStats).
	RunCount uint64
	RunTime  time.Duration
}

// Stats reads the program's counters.
func (t *Tracer) Stats() (Stats, error) {
	if t.coll == nil {
		return Stats{}, errors.New("stage tracer is closed")
	}
	var s Stats
	fields := []*uint64{&s.Seen, &s.Counted, &s.NotIP, &s.Truncated, &s.MapFull, &s.SeqShort}
	for i, f := range fields {
		var per []uint64
		if err := t.coll.Maps[stagetraceMapStats].Lookup(uint32(i), &per); err != nil {
			return s, fmt.Errorf("read stats: %w", err)
		}
		for _, n := range per {
			*f += n
		}
	}
	for _, p := range t.coll.Programs {
		ps, err := p.Stats()
		if err != nil {
			return s, fmt.Errorf("read program stats: %w", err)
		}
		s.Missed, s.RunCount, s.RunTime = ps.RecursionMisses, ps.RunCount, ps.Runtime
	}
	return s, nil
}

// Reset clears the flow and order counters (not Stats), e.g. between the
// phases of a test. Packets counted while it runs may survive it.
func (t *Tracer) Reset() error {
	if t.coll == nil {
		return errors.New("stage tracer is closed")
	}
	for _, name := range []string{stagetraceMapStages, stagetraceMapSeqs} {
		m := t.coll.Maps[name]
		var keys [][]byte
		var prev any // nil: start from the first key
		for {
			var k []byte
			if err := m.NextKey(prev, &k); errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			} else if err != nil {
				return fmt.Errorf("reset %s: %w", name, err)
			}
			keys = append(keys, k)
			prev = k
		}
		for _, k := range keys {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("reset %s: %w", name, err)
			}
		}
	}
	return nil
}

// comm is a task name as the kernel keeps it, NUL-padded.
func comm(b [16]int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// hops names a recorded path's devices.
func (t *Tracer) hops(p stagetracePath) []Hop {
	if p.N == 0 {
		return nil
	}
	if t.names == nil {
		t.names = newResolver()
	}
	var out []Hop
	for _, h := range p.H[:min(int(p.N), len(p.H))] {
		out = append(out, Hop{Stage: t.names.names[h.Netns] + "/" + t.names.dev(h.Netns, int(h.Ifindex)), CPU: int(h.Cpu),
			At: time.Duration(h.Ns), Hash: h.Hash, Meta: h.Meta, MetaLen: int(h.MetaLen), OuterSport: h.OuterSport, TOS: h.Tos})
	}
	return out
}
