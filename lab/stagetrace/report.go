package stagetrace

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a trace counted, for people (WriteText) and as JSON
// (falcon-lab trace --json): each stage's packets per CPU, the busiest flows
// with the CPUs of each of their stages, and the order at the sequence
// device when one was set.
type Report struct {
	Hook       string       `json:"hook"`
	Seconds    float64      `json:"seconds"`
	Stages     []StageCount `json:"stages"`
	Flows      []FlowStages `json:"flows"`
	FlowsTotal int          `json:"flows_total"`
	Order      []FlowOrder  `json:"order,omitempty"`
	Stats      Stats        `json:"stats"`
}

// StageCount is one stage (a device in a namespace): packets and skbs per
// CPU, all flows together.
type StageCount struct {
	Stage      string         `json:"stage"`
	Netns      string         `json:"netns"`
	NetnsInode uint32         `json:"netns_inode"`
	Dev        string         `json:"dev"`
	Ifindex    int            `json:"ifindex"`
	Packets    map[int]uint64 `json:"packets"`
	Skbs       map[int]uint64 `json:"skbs"`
}

// FlowStages is one flow: on which CPUs each of its stages ran.
type FlowStages struct {
	Flow    string                    `json:"flow"`
	Proto   uint8                     `json:"proto"`
	Src     string                    `json:"src"`
	Dst     string                    `json:"dst"`
	Sport   uint16                    `json:"sport"`
	Dport   uint16                    `json:"dport"`
	Packets uint64                    `json:"packets"` // at its busiest stage
	Stages  map[string]map[int]uint64 `json:"stages"`  // stage -> CPU -> packets
}

// FlowOrder is one flow's order at the sequence device.
type FlowOrder struct {
	Flow      string     `json:"flow"`
	Seen      uint64     `json:"seen"`
	Reordered uint64     `json:"reordered"`
	First     *Inversion `json:"first_reordered,omitempty"`
}

// Report reads what the tracer counted over d into a Report, the busiest
// maxFlows flows first (0: all).
func (t *Tracer) Report(d time.Duration, maxFlows int) (Report, error) {
	rep := Report{Hook: t.Hook(), Seconds: d.Seconds(), Stages: []StageCount{}, Flows: []FlowStages{}}
	recs, err := t.Snapshot()
	if err != nil {
		return rep, err
	}
	if rep.Stats, err = t.Stats(); err != nil {
		return rep, err
	}
	stages := map[string]*StageCount{}
	for _, r := range recs {
		s := stages[r.Stage()]
		if s == nil {
			s = &StageCount{Stage: r.Stage(), Netns: r.Netns, NetnsInode: r.NetnsInode, Dev: r.Dev,
				Ifindex: r.Ifindex, Packets: map[int]uint64{}, Skbs: map[int]uint64{}}
			stages[r.Stage()] = s
		}
		for c, n := range r.PerCPU {
			s.Packets[c] += n
			s.Skbs[c] += r.SkbsPerCPU[c]
		}
	}
	for _, s := range stages {
		rep.Stages = append(rep.Stages, *s)
	}
	sort.Slice(rep.Stages, func(i, j int) bool { return rep.Stages[i].Stage < rep.Stages[j].Stage })

	for f, st := range StagesByFlow(recs) {
		tf := FlowStages{Flow: f.String(), Proto: f.Proto, Src: f.Src.String(), Dst: f.Dst.String(),
			Sport: f.Sport, Dport: f.Dport, Stages: st}
		for _, cpus := range st {
			tf.Packets = max(tf.Packets, Total(cpus))
		}
		rep.Flows = append(rep.Flows, tf)
	}
	rep.FlowsTotal = len(rep.Flows)
	sort.Slice(rep.Flows, func(i, j int) bool {
		a, b := rep.Flows[i], rep.Flows[j]
		if a.Packets != b.Packets {
			return a.Packets > b.Packets
		}
		return a.Flow < b.Flow
	})
	if maxFlows > 0 && len(rep.Flows) > maxFlows {
		rep.Flows = rep.Flows[:maxFlows]
	}
	if t.seq {
		seqs, err := t.Reordering()
		if err != nil {
			return rep, err
		}
		rep.Order = []FlowOrder{}
		for _, s := range seqs {
			rep.Order = append(rep.Order, FlowOrder{Flow: s.Flow.String(), Seen: s.Seen, Reordered: s.Reordered, First: s.First})
		}
	}
	return rep, nil
}

// WriteText writes the report as falcon-lab trace prints it: a table of stages
// by CPU, then the flows, the order and any warning.
func (rep Report) WriteText(out io.Writer) {
	cpuSet := map[int]bool{}
	for _, s := range rep.Stages {
		for c := range s.Packets {
			cpuSet[c] = true
		}
	}
	cpus := make([]int, 0, len(cpuSet))
	for c := range cpuSet {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)

	fmt.Fprintf(out, "%s, %.1fs: %d skbs seen, %d counted\n\n", rep.Hook, rep.Seconds, rep.Stats.Seen, rep.Stats.Counted)
	if len(rep.Stages) == 0 {
		fmt.Fprintln(out, "no packets matched")
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "STAGE\t")
	for _, c := range cpus {
		fmt.Fprintf(w, "CPU%d\t", c)
	}
	fmt.Fprint(w, "PACKETS\tSKBS\t\n")
	for _, s := range rep.Stages {
		fmt.Fprintf(w, "%s\t", s.Stage)
		for _, c := range cpus {
			fmt.Fprintf(w, "%d\t", s.Packets[c])
		}
		fmt.Fprintf(w, "%d\t%d\t\n", Total(s.Packets), Total(s.Skbs))
	}
	w.Flush()

	fmt.Fprintf(out, "\nflows (%d of %d, busiest first): stage cpuN=packets\n", len(rep.Flows), rep.FlowsTotal)
	for _, f := range rep.Flows {
		names := make([]string, 0, len(f.Stages))
		for st := range f.Stages {
			names = append(names, st)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, st := range names {
			parts[i] = st + " " + FormatCPUs(f.Stages[st])
		}
		fmt.Fprintf(out, "  %s\n      %s\n", f.Flow, strings.Join(parts, " | "))
	}
	if rep.Order != nil {
		fmt.Fprintln(out, "\norder at the sequence device:")
		if len(rep.Order) == 0 {
			fmt.Fprintln(out, "  no sequenced UDP or TCP over IPv4 seen")
		}
		for _, o := range rep.Order {
			fmt.Fprintf(out, "  %s: %d seen, %d reordered\n", o.Flow, o.Seen, o.Reordered)
			if o.First != nil {
				fmt.Fprintf(out, "      the first %s\n", o.First)
			}
		}
	}
	if rep.Stats.MapFull > 0 {
		fmt.Fprintf(out, "\nwarning: %d skbs not counted, the flow table was full: narrow --netns, --ports or --proto\n", rep.Stats.MapFull)
	}
}
