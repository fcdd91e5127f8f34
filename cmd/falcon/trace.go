package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/falconnet/falcon/internal/stagetrace"
)

func init() {
	register(command{name: "trace", summary: "show on which CPU each device stage of each flow runs", run: runTrace})
}

const traceSynopsis = `[--duration 5s] [--netns NS,...] [--proto tcp|udp|all] [--ports LO[-HI]] [--vxlan-ports P,...] [--seq NS/DEV] [--flows N] [--json]`

// traceOut is where the trace command prints; tests replace it.
var traceOut io.Writer = os.Stdout

type traceArgs struct {
	opts     stagetrace.Options
	duration time.Duration
	flows    int
	json     bool
}

func parseTraceArgs(args []string) (traceArgs, error) {
	var a traceArgs
	fs := newFlagSet("trace", traceSynopsis)
	fs.DurationVar(&a.duration, "duration", 5*time.Second, "how long to count (Ctrl-C stops early)")
	nsList := fs.String("netns", "", "count only in these network namespaces (names in /run/netns or paths, comma-separated)")
	proto := fs.String("proto", "all", "count only tcp, udp, or all")
	ports := fs.String("ports", "", "count only flows with a source or destination port in LO-HI (or one port)")
	vxlan := fs.String("vxlan-ports", "4789,8472", "UDP ports that carry VXLAN, whose inner flow is counted")
	seq := fs.String("seq", "", "NS/DEV: count reordered sequenced UDP (internal/seqcheck senders) at this device")
	tp := fs.String("tracepoint", "netif_receive_skb", "net: tracepoint to count at ("+strings.Join(stagetrace.Tracepoints, ", ")+")")
	fs.IntVar(&a.flows, "flows", 20, "list the N busiest flows (0: all)")
	fs.BoolVar(&a.json, "json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	if a.duration <= 0 {
		return a, usagef("--duration must be positive, not %s", a.duration)
	}
	if a.flows < 0 {
		return a, usagef("--flows must be 0 or more, not %d", a.flows)
	}
	o := &a.opts
	o.Tracepoint = *tp
	if *nsList != "" {
		o.Netns = strings.Split(*nsList, ",")
	}
	switch *proto {
	case "all":
	case "tcp":
		o.Proto = 6
	case "udp":
		o.Proto = 17
	default:
		return a, usagef("--proto must be tcp, udp or all, not %q", *proto)
	}
	if *ports != "" {
		lo, hi, isRange := strings.Cut(*ports, "-")
		if !isRange {
			hi = lo
		}
		l, err1 := strconv.ParseUint(lo, 10, 16)
		h, err2 := strconv.ParseUint(hi, 10, 16)
		if err1 != nil || err2 != nil || l == 0 || l > h {
			return a, usagef("--ports %q: want PORT or LO-HI with 1 <= LO <= HI <= 65535", *ports)
		}
		o.PortMin, o.PortMax = uint16(l), uint16(h)
	}
	o.VXLANPorts = []uint16{}
	for _, p := range strings.Split(*vxlan, ",") {
		if p == "" {
			continue
		}
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return a, usagef("--vxlan-ports: %q is not a port", p)
		}
		o.VXLANPorts = append(o.VXLANPorts, uint16(n))
	}
	if *seq != "" {
		ns, dev, ok := strings.Cut(*seq, "/")
		if !ok || dev == "" {
			return a, usagef("--seq %q: want NETNS/DEV (NETNS empty for the current namespace)", *seq)
		}
		o.SeqNetns, o.SeqDev = ns, dev
	}
	return a, nil
}

func runTrace(args []string) error {
	a, err := parseTraceArgs(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root to load BPF programs")
	}
	tr, err := stagetrace.Start(a.opts)
	if err != nil {
		return err
	}
	defer tr.Close()
	if !a.json {
		fmt.Fprintf(os.Stderr, "counting at %s for %s (Ctrl-C stops early)\n", tr.Hook(), a.duration)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(a.duration):
	}
	rep, err := traceReport(tr, time.Since(start), a.flows, a.opts.SeqDev != "")
	if err != nil {
		return err
	}
	if a.json {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(traceOut, "%s\n", b)
		return err
	}
	printTraceReport(traceOut, rep)
	return nil
}

type traceStage struct {
	Stage      string         `json:"stage"`
	Netns      string         `json:"netns"`
	NetnsInode uint32         `json:"netns_inode"`
	Dev        string         `json:"dev"`
	Ifindex    int            `json:"ifindex"`
	Packets    map[int]uint64 `json:"packets"`
	Skbs       map[int]uint64 `json:"skbs"`
}

type traceFlow struct {
	Flow    string                    `json:"flow"`
	Proto   uint8                     `json:"proto"`
	Src     string                    `json:"src"`
	Dst     string                    `json:"dst"`
	Sport   uint16                    `json:"sport"`
	Dport   uint16                    `json:"dport"`
	Packets uint64                    `json:"packets"` // at its busiest stage
	Stages  map[string]map[int]uint64 `json:"stages"`  // stage -> CPU -> packets
}

type traceOrder struct {
	Flow      string `json:"flow"`
	Seen      uint64 `json:"seen"`
	Reordered uint64 `json:"reordered"`
}

type traceResult struct {
	Hook       string           `json:"hook"`
	Seconds    float64          `json:"seconds"`
	Stages     []traceStage     `json:"stages"`
	Flows      []traceFlow      `json:"flows"`
	FlowsTotal int              `json:"flows_total"`
	Order      []traceOrder     `json:"order,omitempty"`
	Stats      stagetrace.Stats `json:"stats"`
}

func traceReport(tr *stagetrace.Tracer, d time.Duration, maxFlows int, order bool) (traceResult, error) {
	rep := traceResult{Hook: tr.Hook(), Seconds: d.Seconds(), Stages: []traceStage{}, Flows: []traceFlow{}}
	recs, err := tr.Snapshot()
	if err != nil {
		return rep, err
	}
	if rep.Stats, err = tr.Stats(); err != nil {
		return rep, err
	}
	stages := map[string]*traceStage{}
	for _, r := range recs {
		s := stages[r.Stage()]
		if s == nil {
			s = &traceStage{Stage: r.Stage(), Netns: r.Netns, NetnsInode: r.NetnsInode, Dev: r.Dev,
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

	for f, st := range stagetrace.StagesByFlow(recs) {
		tf := traceFlow{Flow: f.String(), Proto: f.Proto, Src: f.Src.String(), Dst: f.Dst.String(),
			Sport: f.Sport, Dport: f.Dport, Stages: st}
		for _, cpus := range st {
			tf.Packets = max(tf.Packets, stagetrace.Total(cpus))
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
	if order {
		seqs, err := tr.Reordering()
		if err != nil {
			return rep, err
		}
		rep.Order = []traceOrder{}
		for _, s := range seqs {
			rep.Order = append(rep.Order, traceOrder{Flow: s.Flow.String(), Seen: s.Seen, Reordered: s.Reordered})
		}
	}
	return rep, nil
}

func printTraceReport(out io.Writer, rep traceResult) {
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
		fmt.Fprintf(w, "%d\t%d\t\n", stagetrace.Total(s.Packets), stagetrace.Total(s.Skbs))
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
			parts[i] = st + " " + stagetrace.FormatCPUs(f.Stages[st])
		}
		fmt.Fprintf(out, "  %s\n      %s\n", f.Flow, strings.Join(parts, " | "))
	}
	if rep.Order != nil {
		fmt.Fprintln(out, "\norder at the sequence device:")
		if len(rep.Order) == 0 {
			fmt.Fprintln(out, "  no sequenced UDP seen")
		}
		for _, o := range rep.Order {
			fmt.Fprintf(out, "  %s: %d seen, %d reordered\n", o.Flow, o.Seen, o.Reordered)
		}
	}
	if rep.Stats.MapFull > 0 {
		fmt.Fprintf(out, "\nwarning: %d skbs not counted, the flow table was full: narrow --netns, --ports or --proto\n", rep.Stats.MapFull)
	}
}
