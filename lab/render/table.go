package render

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/papers"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
	"github.com/falconnet/falcon/lab/workload"
)

// headlineNote marks a figure that is not packets/s.
var headlineNote = map[string]string{"pps": "", "gbps": " (Gbit/s)", "lat_p99_us": " (p99)", "cpu_total_busy": " (total CPU)"}

// WriteTable writes the Markdown table of a results file, and under it the
// machine, the method and anything that went wrong. It depends only on the
// file, so a re-read file renders byte for byte the same.
func WriteTable(w io.Writer, f *schema.File) error {
	var b strings.Builder
	writeCases(&b, f)
	b.WriteString("\n")
	writeVsOverlay(&b, f)
	writePaperClaims(&b, f)
	writeTCPReordering(&b, f)
	writeBPFCosts(&b, f)
	writeFalconActivity(&b, f)
	writeFastPath(&b, f)
	writeRunByRun(&b, f)
	writeOverload(&b, f)
	writeRates(&b, f)
	writeHotspot(&b, f)
	writeMethod(&b, f)
	for _, n := range f.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	for _, r := range f.Results {
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "\nFailed: %s/%s %s %s: %s\n", r.Layout, r.Mode, r.Workload, workload.FormatSize(r.Size), e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCases writes the table of the cases, a row each.
func writeCases(b *strings.Builder, f *schema.File) {
	cpus := schema.CPUsOf(f.Results)
	softHdr, idleHdr := "softirq % per CPU", "idle % per CPU"
	if len(cpus) > 0 {
		var ids []string
		for _, c := range cpus {
			ids = append(ids, fmt.Sprint(c))
		}
		softHdr = "softirq % (CPU " + strings.Join(ids, "/") + ")"
		idleHdr = "idle % (CPU " + strings.Join(ids, "/") + ")"
	}
	fmt.Fprintf(b, "| layout | mode | workload | size | flows | packets/s | Gbit/s | loss %% | p99 µs | vs baseline | baseline | %s | %s |\n", softHdr, idleHdr)
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, r := range f.Results {
		s := r.Summary
		flows := fmt.Sprint(r.Flows)
		if w, _ := workload.Lookup(r.Workload); w.Pairs == workload.ClientsToOne && r.Clients > 0 {
			flows = fmt.Sprintf("1 (%d clients)", r.Clients)
		}
		p99 := "—"
		if x, ok := s["lat_p99_us"]; ok {
			p99 = pm(x, 1, "")
		}
		norm, base := "—", "—"
		if x, ok := r.Normalized[workload.JudgedBy(r.Workload)]; ok {
			norm, base = pm(x, 2, "")+headlineNote[workload.JudgedBy(r.Workload)], r.Baseline
		}
		pps, gbps, loss := "—", "—", "—"
		if len(r.Runs) > 0 {
			pps, gbps, loss = pmSI(s["pps"]), pm(s["gbps"], sigDecimals(s["gbps"].Mean, 3), ""), pm(s["loss_pct"], 2, "")
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Layout, r.Mode, workloadLabel(r), workload.FormatSize(r.Size), flows, pps, gbps, loss, p99, norm, base,
			perCPU(r, cpus, "soft"), perCPU(r, cpus, "idle"))
	}
}

// perCPU is a result's mean of one per-CPU metric, CPU by CPU: "12/80".
func perCPU(r schema.Result, cpus []int, metric string) string {
	var v []string
	for _, c := range cpus {
		if x, ok := r.Summary[fmt.Sprintf("cpu%d_%s", c, metric)]; ok {
			v = append(v, fmt.Sprintf("%.0f", x.Mean))
		} else {
			v = append(v, "—")
		}
	}
	if len(r.Runs) == 0 || len(v) == 0 {
		return "—"
	}
	return strings.Join(v, "/")
}

// writeMethod writes the machine, the method and what the columns mean.
func writeMethod(b *strings.Builder, f *schema.File) {
	m := f.Machine
	fmt.Fprintf(b, "Machine: %s, %d CPUs, %s, kernel %s (%s).\n", orDash(m.CPUModel), m.Cores, memString(m.MemoryBytes), orDash(m.Kernel), orDash(m.Hostname))
	c := f.Config
	fmt.Fprintf(b, "Method: %d run(s) of %s each after %s warm-up; mean ± 95 %% CI (Student t); senders on CPU %s, receivers on CPU %s.\n",
		c.Runs, c.Duration, c.Warmup, cpuset.Format(c.SenderCPUs), cpuset.Format(c.ReceiverCPUs))
	b.WriteString("packets/s: UDP datagrams the receiving applications got (Udp and Udp6 InDatagrams), TCP segments after GRO (Tcp InSegs), " +
		"messages sent (latency workloads), operations (memcached) or requests (web); Gbit/s: payload; loss: UDP datagrams sent but not received, TCP retransmitted segments, " +
		"latency messages unanswered, web requests failed; p99: sockperf's one-way latency, memcached's operation round trip (interpolated in memcaslap's " +
		"power-of-two buckets) or web's request round trip (wrk's); vs baseline: divided by the baseline's packets/s (UDP, memcached, web), Gbit/s (TCP) or p99 latency (below 1 is faster).\n")
	if c.Sender == schema.SenderKernel {
		b.WriteString("Sender: falcon's kernel sender (--sender kernel): the overlay's own frames, learned once, sent flat out by XDP " +
			"in live-frame mode from the sending host's wire on the sender CPU; loss against the frames " +
			"sent in the window.\n")
	}
	if c.IPv6 {
		b.WriteString("IPv6: every testbed over IPv6 only (--ipv6): wire, VXLAN and containers; the wire's MTU is 1520 for the " +
			"20 bytes VXLAN takes more over IPv6, the overlays keep 1450.\n")
	}
	if c.Interleave {
		b.WriteString("Interleaved: the modes of a layout took turns run by run on one testbed, each set up and undone in every round; " +
			"vs baseline is the geometric mean of each run divided by the baseline's run of the same round, with its 95 % interval " +
			"(Student t on the logarithms) in brackets.\n")
	}
	if f.Interrupted {
		b.WriteString("\nInterrupted: the results are incomplete.\n")
	} else if f.Partial {
		b.WriteString("\nPartial: saved while the bench was still running.\n")
	}
}

// pm writes "mean ± ci95" with the given decimals, or for a geometric
// mean "mean (lo–hi)", its interval not being symmetric.
func pm(x stats.Summary, dec int, unit string) string {
	if x.N == 0 {
		return "—"
	}
	s := fmt.Sprintf("%.*f", dec, x.Mean)
	switch {
	case x.N > 1 && x.Geometric:
		s += fmt.Sprintf(" (%.*f–%.*f)", dec, x.Lo, dec, x.Hi)
	case x.N > 1:
		s += fmt.Sprintf(" ± %.*f", dec, x.CI95)
	}
	return s + unit
}

// sigDecimals is how many decimals show sig significant digits of x.
func sigDecimals(x float64, sig int) int {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return sig - 1
	}
	d := sig - 1 - int(math.Floor(math.Log10(math.Abs(x))))
	return min(max(d, 0), 6)
}

// pmSI writes a rate with an SI prefix shared by mean and interval:
// "244.1k ± 3.2k".
func pmSI(x stats.Summary) string {
	if x.N == 0 {
		return "—"
	}
	scale, unit := 1.0, ""
	switch a := math.Abs(x.Mean); {
	case a >= 1e9:
		scale, unit = 1e9, "G"
	case a >= 1e6:
		scale, unit = 1e6, "M"
	case a >= 1e3:
		scale, unit = 1e3, "k"
	}
	s := fmt.Sprintf("%.1f%s", x.Mean/scale, unit)
	if x.N > 1 {
		s += fmt.Sprintf(" ± %.1f%s", x.CI95/scale, unit)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func memString(b uint64) string {
	if b == 0 {
		return "memory unknown"
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// writeBPFCosts lists each falcon program's cost per run (--bpf-stats).
func writeBPFCosts(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		var names []string
		for k := range r.Summary {
			if strings.HasPrefix(k, "bpf_") && strings.HasSuffix(k, "_ns_per_run") {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			prog := strings.TrimSuffix(strings.TrimPrefix(k, "bpf_"), "_ns_per_run")
			perPkt := "—"
			if v, ok := r.Summary["bpf_"+prog+"_ns_per_packet"]; ok {
				perPkt = pm(v, 0, "")
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |\n",
				r.Layout, r.Mode, r.Workload, workload.FormatSize(r.Size), prog, pm(r.Summary[k], 0, ""), perPkt))
		}
	}
	writeSection(b, rows, "BPF program cost (kernel BPF statistics over the window: run time / run count, and run time / packets the applications got):",
		"| layout | mode | workload | size | program | ns per run | ns per packet |\n|---|---|---|---:|---|---:|---:|")
}

// writeTCPReordering lists what reordering cost each TCP case: the
// receiver's out-of-order queue against the sender's retransmissions, and
// the sender's findings (Run.Reordering). Files from before those counters
// were kept show iperf3's out-of-order and retransmission counts only.
func writeTCPReordering(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		s := r.Summary
		if !workload.IsTCP(r.Workload) || len(r.Runs) == 0 {
			continue
		}
		count := func(k string) string {
			if x, ok := s[k]; ok && x.N > 0 {
				return fmt.Sprintf("%.0f", x.Mean)
			}
			return "—"
		}
		var ofo, retrans string
		switch _, old := s["retransmits"]; {
		case s["tcp_ofo_queue"].N > 0:
			ofo, retrans = count("tcp_ofo_queue"), count("tcp_retrans")
		case old: // iperf3's workloads before Reordering
			ofo, retrans = count("out_of_order"), count("retransmits")
		default:
			continue
		}
		pct := "—"
		if x, ok := s["tcp_ofo_pct"]; ok {
			pct = fmt.Sprintf("%.2f", x.Mean)
		}
		pair := func(a, b string) string {
			if a == "—" && b == "—" {
				return "—"
			}
			return a + "/" + b
		}
		exact := "—"
		if x, ok := s["tcp_order_segments"]; ok && x.N > 0 {
			// Totals over the runs: a single reordered segment must show.
			var n, of int64
			for _, run := range r.Runs {
				if o := run.Reordering; o != nil && o.Order != nil {
					n, of = n+o.Order.Reordered, of+o.Order.Segments
				}
			}
			exact = fmt.Sprintf("%d of %d", n, of)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Layout, r.Mode, r.Workload, workload.FormatSize(r.Size), r.Flows, exact, pair(ofo, retrans), pct, count("tcp_ofo_merge"),
			pair(count("tcp_sack_reorder"), count("tcp_ts_reorder")), pair(count("tcp_dsack_recv"), count("tcp_dsack_ofo_recv")),
			count("tcp_spurious_rtos"), count("tcp_lost_retrans")))
	}
	writeSection(b, rows, "TCP reordering (reordered: with --order-check, the data segments that reached the server's device after one sent later, "+
		"by IP ID, over all runs; kernel counters per window, mean of the runs; ofo/retrans: segments the receiver queued out of order / "+
		"segments the sender retransmitted; ofo %: out-of-order share of the segments received; merged: out-of-order segments whose data the queue "+
		"already held; reordering seen: the sender's SACK/timestamp detections; DSACKs: duplicate SACKs the sender got, all/for out-of-order data):",
		"| layout | mode | workload | size | flows | reordered | ofo/retrans | ofo % | merged | reordering seen (SACK/TS) | DSACKs (all/ofo) | spurious RTOs | lost retrans |\n"+
			"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
}

// writeSection writes a titled table under the results, if it has rows.
func writeSection(b *strings.Builder, rows []string, title, header string) {
	if len(rows) == 0 {
		return
	}
	b.WriteString(title + "\n\n" + header + "\n")
	for _, r := range rows {
		b.WriteString(r)
	}
	b.WriteString("\n")
}

// writeFalconActivity says where falcon was during the windows: a cost
// or a gain measured while it was still deciding (the engagement test,
// standing down) is a transient, not what it does once settled.
func writeFalconActivity(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		on, ok := r.Summary["falcon_on_path_pct"]
		if !ok {
			continue
		}
		begun, thin := "–", "–" // not counted by the falcon that wrote the file
		if x, ok := r.Summary["falcon_tests_begun"]; ok {
			begun, thin = pm(x, 1, ""), pm(r.Summary["falcon_tests_thin"], 1, "")
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", r.Layout, r.Mode, r.Workload,
			workload.FormatSize(r.Size), r.Flows, pm(on, 0, ""), pm(r.Summary["falcon_engaged_pct"], 0, ""),
			pm(r.Summary["falcon_switches"], 1, ""), begun, pm(r.Summary["falcon_tests"], 1, ""), thin))
	}
	writeSection(b, rows, "Falcon during the windows (% of each window on the path and engaged; switches on or off the path; engagement tests begun, "+
		"ended with a verdict and ended without one for too little traffic, each counted in the window where it began or ended; per window):",
		"| layout | mode | workload | size | flows | on the path % | engaged % | switches | tests begun | verdicts | too thin |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
}

// writePaperClaims sets beside a measured ratio what the papers report
// for the same test, metric and baseline, with their words to check it by.
func writePaperClaims(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		for _, pc := range paperClaims(r) {
			rows = append(rows, fmt.Sprintf("- %s/%s %s %s, %d flow(s): measured %s × %s (%s); %s — “%s”\n",
				r.Layout, r.Mode, r.Workload, workload.FormatSize(r.Size), r.Flows, pm(pc.measured, 2, ""), r.Baseline, metricNames[pc.metric], claimText(pc.Claim), pc.Figure.Quote))
		}
	}
	if len(rows) > 0 {
		b.WriteString("Reported by the papers for the same test, metric and baseline (their text's numbers and words):\n\n" + strings.Join(rows, "") + "\n")
	}
}

// paperClaim is a paper's value comparable to one of a result's ratios.
type paperClaim struct {
	metric   string        // the normalised metric it is comparable to
	measured stats.Summary // our ratio
	papers.Claim
}

// paperClaims lists the papers' values comparable to r's ratios, each
// once (a UDP case's packets/s and Gbit/s are the same ratio): what the
// table lists and the charts mark.
func paperClaims(r schema.Result) []paperClaim {
	var out []paperClaim
	seen := map[string]bool{}
	for _, k := range schema.NormalizedMetrics {
		x, ok := r.Normalized[k]
		if !ok {
			continue
		}
		c := papers.Case{Layout: r.Layout, Mode: r.Mode, Workload: r.Workload, Size: r.Size, Flows: r.Flows, Baseline: r.Baseline, Metric: k}
		for _, cl := range papers.Comparable(c) {
			fig, v := cl.Figure, cl.Value
			id := fig.Paper + fig.Figure + fig.Quote + v.Said
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, paperClaim{k, x, cl})
		}
	}
	return out
}

var metricNames = map[string]string{"pps": "packets/s", "gbps": "Gbit/s", "lat_avg_us": "average latency",
	"lat_p50_us": "median latency", "lat_p99_us": "p99 latency"}

// claimText reads "FALCON Fig. 13 (a, b) (16 B, UDP): up to 1.63 × vanilla overlay".
func claimText(cl papers.Claim) string {
	fig, v := cl.Figure, cl.Value
	name := fig.Paper + " " + fig.Figure
	if fig.Panels != "" {
		name += " (" + fig.Panels + ")"
	}
	var setup []string
	for _, s := range []string{fig.Config.NIC, fig.Config.Size, fig.Config.Protocol} {
		if s != "" {
			setup = append(setup, s)
		}
	}
	if len(setup) > 0 {
		name += " (" + strings.Join(setup, ", ") + ")"
	}
	val := fmt.Sprintf("%g", v.Value)
	if v.Max != 0 {
		val += fmt.Sprintf("–%g", v.Max)
	}
	if v.Bound != "" {
		val = v.Bound + " " + val
	}
	return fmt.Sprintf("%s: %s × %s", name, val, v.RelativeTo)
}

// RunLine is one run in a few words, for the progress and logs.
func RunLine(r schema.Run) string {
	s := fmt.Sprintf("%s pps, %.3f Gbit/s, loss %.2f%%", pmSI(stats.Summary{Mean: r.PPS, N: 1}), r.Gbps, r.LossPct)
	if r.Latency != nil {
		s += fmt.Sprintf(", p50 %.1f µs, p99 %.1f µs", r.Latency.P50Us, r.Latency.P99Us)
	}
	var soft []string
	for _, c := range slices.Sorted(maps.Keys(r.CPU)) {
		soft = append(soft, fmt.Sprintf("%.0f", r.CPU[c].Usage.Soft))
	}
	s += ", softirq % " + strings.Join(soft, "/")
	if r.ReassemblyWaitS > 0 {
		s += fmt.Sprintf(" (began after %.1f s: fragments of datagrams earlier runs lost had to expire)", r.ReassemblyWaitS)
	}
	if r.SetupRetries > 0 {
		s += fmt.Sprintf(" (%d UDP client(s) started again: the datagram setting up the stream was lost)", r.SetupRetries)
	}
	return s
}
