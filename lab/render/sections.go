// Package render draws a bench results file (schema.File) for people: the
// Markdown table with its sections (table.go, sections.go), the SVG charts
// (svg.go, chart.go, charts.go, sweep.go) and the file's section of the HTML
// report (html.go, on lab/report's page). It reads only the file: what a
// run measured is decided by bench, how it is shown here.
package render

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
	"github.com/falconnet/falcon/lab/workload"
)

// writeHotspot lists each hotspot case's rates before and after flow 0
// turned heavy, UDP's in datagrams/s and TCP's in Gbit/s, a table each;
// the series are in the results file.
func writeHotspot(b *strings.Builder, f *schema.File) {
	var udp, tcp []string
	for _, r := range f.Results {
		if !workload.IsHotspot(r.Workload) || len(r.Runs) == 0 {
			continue
		}
		s := r.Summary
		var at []float64
		for _, run := range r.Runs {
			if h := run.Hotspot; h != nil {
				at = append(at, h.HeavyAtS-h.WindowStartS)
			}
		}
		light := "—"
		if o := r.Offered; o != nil {
			light = o.Spec
			if workload.IsTCP(r.Workload) && o.Spec != workload.FormatRate(o.BitsPerSecond) {
				light += " = " + workload.FormatRate(o.BitsPerSecond) // a packet rate, in full segments
			}
		}
		switchAt := pm(stats.Summarize(at), 2, " s")
		if !workload.IsTCP(r.Workload) {
			arrow := func(before, after string) string { return pmSI(s[before]) + " → " + pmSI(s[after]) }
			udp = append(udp, fmt.Sprintf("| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", r.Layout, r.Mode, workload.FormatSize(r.Size), r.Flows, light,
				switchAt, arrow("hotspot_heavy_before_pps", "hotspot_heavy_after_pps"),
				arrow("hotspot_light_before_pps", "hotspot_light_after_pps"), pmSI(s["hotspot_after_pps"])))
			continue
		}
		gbps := func(k string) string { return pm(s[k], sigDecimals(s[k].Mean, 3), "") }
		arrow := func(before, after string) string { return gbps(before) + " → " + gbps(after) }
		tcp = append(tcp, fmt.Sprintf("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Layout, r.Mode, workload.FormatSize(r.Size), r.Flows, light,
			switchAt, arrow("hotspot_heavy_before_gbps", "hotspot_heavy_after_gbps"),
			arrow("hotspot_light_before_gbps", "hotspot_light_after_gbps"), gbps("hotspot_after_gbps"),
			pm(s["out_of_order"], 0, ""), pm(s["retransmits"], 0, "")))
	}
	writeSection(b, udp, "Hotspot (FALCON Fig. 16): flow 0 light, then flat out on the same 5-tuple from the switch on; "+
		"datagrams/s the receiver got, mean over the window's intervals before and after the switch (each flow's series, "+
		"every 0.1 s, is in the results file):",
		"| layout | mode | size | flows | light rate | switch (into the window) | heavy flow before → after, datagrams/s | light flows before → after, datagrams/s | all flows after, datagrams/s |\n"+
			"|---|---|---:|---:|---|---:|---:|---:|---:|")
	writeSection(b, tcp, "Hotspot over TCP (FALCON Fig. 16, TCP panel): flow 0 light, then flat out on the same 5-tuple from the switch on; "+
		"Gbit/s the receiver got, mean over the window's intervals before and after the switch (each flow's series, every 0.1 s, "+
		"is in the results file); a light rate in packets/s counts full 1448 B segments; out of order: the segments the receiver "+
		"queued out of order over the window (TcpExt TCPOFOQueue), retransmits: the senders' (iperf3's count, over the clients' whole runs):",
		"| layout | mode | write size | flows | light rate | switch (into the window) | heavy flow before → after, Gbit/s | light flows before → after, Gbit/s | all flows after, Gbit/s | out of order segments | retransmits |\n"+
			"|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
}

// writeOverload lists what the overload search found and the latency
// there.
func writeOverload(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		if w, _ := workload.Lookup(r.Workload); w.Driver != workload.DriverOverload || len(r.Runs) == 0 {
			continue
		}
		s := r.Summary
		limited := 0
		for _, run := range r.Runs {
			if run.Overload != nil && run.Overload.SenderLimited {
				limited++
			}
		}
		note := "—"
		if limited > 0 {
			note = fmt.Sprintf("sender-limited in %d of %d runs", limited, len(r.Runs))
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Layout, r.Mode, r.Workload,
			workload.FormatSize(r.Size), pmSI(s["overload_rate_pps"]), pm(s["overload_steps"], 1, ""), pm(s["lat_p50_us"], 1, ""),
			pm(s["lat_p99_us"], 1, ""), pm(s["loss_pct"], 2, ""), note))
	}
	writeSection(b, rows, fmt.Sprintf("Latency when overloaded (FALCON Fig. 12 c, d): the highest rate without drops (no more than %g %% "+
		"of the datagrams lost, or of TCP's segments retransmitted, in a sockperf step of %s: one flat out, then from the rate the receiver "+
		"took of it up while steps pass and by bisection from the first that fails, to within %g %%; no higher than the sender made flat out), "+
		"then sockperf under-load there for the window; latency one-way (half the round trip); every step is in the results file:",
		schema.OverloadMaxLossPct, schema.OverloadStepTime, 100*schema.OverloadPrecision),
		"| layout | mode | workload | size | rate found (messages/s) | steps | p50 µs | p99 µs | loss % in the window | |\n"+
			"|---|---|---|---:|---:|---:|---:|---:|---:|---|")
}

// workloadLabel names a result's workload in the table: the rates
// workloads with their rate.
func workloadLabel(r schema.Result) string {
	if workload.IsRates(r.Workload) && r.Offered != nil {
		return r.Workload + " at " + r.Offered.Spec
	}
	return r.Workload
}

// writeRates lists the rates workloads' cases: offered and delivered rate,
// loss, and the CPU time of all CPUs together (Fig. 19's total CPU and
// softirqs).
func writeRates(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		if !workload.IsRates(r.Workload) || len(r.Runs) == 0 {
			continue
		}
		s := r.Summary
		off := "—"
		if o := r.Offered; o != nil {
			off = fmt.Sprintf("%s (%s bit/s, %s/s)", o.Spec, pmSI(stats.Summary{Mean: o.BitsPerSecond, N: 1}), pmSI(stats.Summary{Mean: o.PacketsPerSecond, N: 1}))
		}
		split := fmt.Sprintf("%.0f/%.0f/%.0f/%.0f of %.0f", s["cpu_total_usr"].Mean, s["cpu_total_sys"].Mean, s["cpu_total_soft"].Mean,
			s["cpu_total_irq"].Mean, s["cpu_total_sampled_busy"].Mean)
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Layout, r.Mode, r.Workload,
			workload.FormatSize(r.Size), off, pmSI(s["pps"]), pm(s["gbps"], sigDecimals(s["gbps"].Mean, 3), ""), pm(s["loss_pct"], 2, ""),
			pm(s["cpu_total_busy"], 0, ""), split, pmSI(s["net_rx_per_s"])))
	}
	writeSection(b, rows, "Fixed rates (the rates workloads, FALCON Fig. 19): each flow held to the offered rate by iperf3 (-b); delivered: "+
		"what the receiving application got; CPU: all CPUs' time over the window summed, in % of one CPU (the sending container's CPU "+
		"included: at a fixed rate its work is the same in every mode); busy by the clock (all but the idle loop's time, which NO_HZ kernels "+
		"keep exactly); usr/sys/soft/irq as the kernel samples them at each tick, of their own busy total (without IRQ_TIME_ACCOUNTING "+
		"they alias with a paced sender's timer: read them as shares, not times); NET_RX: softirqs raised per second on all CPUs:",
		"| layout | mode | workload | size | offered | delivered packets/s | delivered Gbit/s | loss % | CPU busy % | sampled usr/sys/soft/irq % | NET_RX/s |\n"+
			"|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
}
