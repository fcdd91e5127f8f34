package stagetrace

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Flow is a packet's identity as the tracer sees it: the inner 5-tuple for
// VXLAN traffic, the packet's own otherwise, so one flow carries the same
// Flow at every device of the overlay. It is comparable and can key maps.
// Later IP fragments have no ports (0).
type Flow struct {
	Proto    uint8
	Src, Dst netip.Addr
	Sport    uint16
	Dport    uint16
}

func (f Flow) String() string {
	return fmt.Sprintf("%s %s > %s", protoName(f.Proto),
		netip.AddrPortFrom(f.Src, f.Sport), netip.AddrPortFrom(f.Dst, f.Dport))
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	case 58:
		return "icmp6"
	}
	return fmt.Sprintf("proto%d", p)
}

func flowFromBPF(f stagetraceFlow) Flow {
	out := Flow{Proto: f.Proto, Sport: f.Sport, Dport: f.Dport}
	if f.Family == 4 {
		out.Src = netip.AddrFrom4([4]byte(f.Saddr[:4]))
		out.Dst = netip.AddrFrom4([4]byte(f.Daddr[:4]))
	} else {
		out.Src = netip.AddrFrom16(f.Saddr)
		out.Dst = netip.AddrFrom16(f.Daddr)
	}
	return out
}

// Record is what one (network namespace, device, flow) saw.
type Record struct {
	NetnsInode uint32
	Netns      string // name under /run/netns, "" when it has none
	Ifindex    int
	Dev        string // "" when the device is gone or its namespace unreachable
	Flow       Flow
	// PerCPU counts packets by the CPU that ran the device's receive
	// softirq; a GRO super-packet counts as its segments.
	PerCPU map[int]uint64
	// SkbsPerCPU counts the skbs themselves (GRO merges several packets).
	SkbsPerCPU map[int]uint64
	// TCP only (nil otherwise), by CPU as PerCPU: DataSegsPerCPU counts the
	// segments of packets with payload (pure ACKs left out), JumpsPerCPU the
	// runs they came in (see Runs).
	DataSegsPerCPU map[int]uint64
	JumpsPerCPU    map[int]uint64
}

// Runs is how one CPU handled a TCP flow's payload at one stage. A run is
// a stretch of the flow's payload packets that the CPU handled one after
// the other, each starting at the sequence number where the CPU's previous
// one ended: a flow that stays on one CPU makes one run (plus one per
// retransmission or reordering), a flow split at the NIC into micro-flows
// of N packets on successive CPUs makes one run per batch on each, of N
// segments each. A GRO super-packet counts as its segments.
type Runs struct {
	DataSegs uint64 // segments with payload
	Jumps    uint64 // runs: payload packets that did not continue the CPU's last
}

// MeanLen is the mean run length in segments, 0 without runs.
func (r Runs) MeanLen() float64 {
	if r.Jumps == 0 {
		return 0
	}
	return float64(r.DataSegs) / float64(r.Jumps)
}

func (r Runs) String() string {
	return fmt.Sprintf("%d segs in %d runs (mean %.1f)", r.DataSegs, r.Jumps, r.MeanLen())
}

// RunLengths gives, per CPU, the runs of TCP flow f at stage ("netns/dev",
// as Record.Stage) in records; empty when the flow carried no payload there.
func RunLengths(records []Record, f Flow, stage string) map[int]Runs {
	out := map[int]Runs{}
	for _, r := range records {
		if r.Flow != f || r.Stage() != stage {
			continue
		}
		for c, n := range r.DataSegsPerCPU {
			x := out[c]
			x.DataSegs += n
			x.Jumps += r.JumpsPerCPU[c]
			out[c] = x
		}
	}
	return out
}

// DataFlow is the flow to port with the most payload at stage, and that
// payload's segments: iperf3's data connection, not its control
// connection to the same port, which carries a few hundred bytes (and
// whichever of the two a loop met last was a matter of map order).
func DataFlow(recs []Record, stage string, port uint16) (flow Flow, most uint64) {
	for _, r := range recs {
		if r.Stage() != stage || r.Flow.Dport != port {
			continue
		}
		if n := Total(r.DataSegsPerCPU); n > most {
			flow, most = r.Flow, n
		}
	}
	return flow, most
}

// AllRuns sums per-CPU runs.
func AllRuns(perCPU map[int]Runs) Runs {
	var t Runs
	for _, r := range perCPU {
		t.DataSegs += r.DataSegs
		t.Jumps += r.Jumps
	}
	return t
}

// Stage names the record's (namespace, device) as "netns/dev". Namespaces
// without a name show as "init" (the initial one) or "ns<inode>", devices
// without a name as "if<index>".
func (r Record) Stage() string {
	ns := r.Netns
	if ns == "" {
		if r.NetnsInode == initNetnsInode() {
			ns = "init"
		} else {
			ns = fmt.Sprintf("ns%d", r.NetnsInode)
		}
	}
	dev := r.Dev
	if dev == "" {
		dev = fmt.Sprintf("if%d", r.Ifindex)
	}
	return ns + "/" + dev
}

// StagesByFlow regroups records as flow -> stage ("netns/dev") -> CPU ->
// packets.
func StagesByFlow(records []Record) map[Flow]map[string]map[int]uint64 {
	out := map[Flow]map[string]map[int]uint64{}
	for _, r := range records {
		st := out[r.Flow]
		if st == nil {
			st = map[string]map[int]uint64{}
			out[r.Flow] = st
		}
		cpus := st[r.Stage()]
		if cpus == nil {
			cpus = map[int]uint64{}
			st[r.Stage()] = cpus
		}
		for c, n := range r.PerCPU {
			cpus[c] += n
		}
	}
	return out
}

// Total sums per-CPU counts.
func Total(perCPU map[int]uint64) uint64 {
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}

// FormatCPUs writes per-CPU counts as "cpu0=12 cpu1=3", in CPU order.
func FormatCPUs(perCPU map[int]uint64) string {
	cpus := make([]int, 0, len(perCPU))
	for c := range perCPU {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	var b strings.Builder
	for i, c := range cpus {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "cpu%d=%d", c, perCPU[c])
	}
	return b.String()
}
