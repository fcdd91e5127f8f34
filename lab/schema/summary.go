package schema

import (
	"fmt"
	"sort"
	"strings"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/stats"
)

// Metrics flattens one run into the named values that get summarised.
// Per-CPU values are "cpuN_usr" … "cpuN_busy" in percent, and "cpuN_net_rx",
// "cpuN_res", "cpuN_received_rps" per second of window, "cpuN_softnet_dropped"
// and "cpuN_time_squeeze" as counts. TCP runs add "tcp_ofo_queue",
// "tcp_retrans", … (Run.Reordering's counts per window) and "tcp_ofo_pct".
func Metrics(r Run) map[string]float64 {
	m := map[string]float64{"pps": r.PPS, "gbps": r.Gbps, "loss_pct": r.LossPct}
	if r.OutOfOrder != nil {
		m["out_of_order"] = float64(*r.OutOfOrder)
	}
	if r.Retransmits != nil {
		m["retransmits"] = float64(*r.Retransmits)
	}
	if o := r.Reordering; o != nil {
		m["tcp_ofo_queue"], m["tcp_ofo_drop"], m["tcp_ofo_merge"] = float64(o.OFOQueue), float64(o.OFODrop), float64(o.OFOMerge)
		m["tcp_sack_reorder"], m["tcp_ts_reorder"] = float64(o.SACKReorder), float64(o.TSReorder)
		m["tcp_dsack_recv"], m["tcp_dsack_ofo_recv"], m["tcp_dsack_recv_segs"] = float64(o.DSACKRecv), float64(o.DSACKOfoRecv), float64(o.DSACKRecvSegs)
		m["tcp_spurious_rtos"], m["tcp_lost_retrans"], m["tcp_retrans"] = float64(o.SpuriousRTOs), float64(o.LostRetrans), float64(o.Retrans)
		if o.InSegs > 0 {
			// The share of the segments received that arrived after a hole.
			m["tcp_ofo_pct"] = 100 * float64(o.OFOQueue) / float64(o.InSegs)
		}
		if o.Order != nil {
			m["tcp_order_segments"], m["tcp_reordered"] = float64(o.Order.Segments), float64(o.Order.Reordered)
		}
	}
	if l := r.Latency; l != nil {
		m["lat_avg_us"], m["lat_p50_us"], m["lat_p90_us"] = l.AvgUs, l.P50Us, l.P90Us
		m["lat_p99_us"], m["lat_p999_us"], m["lat_max_us"] = l.P99Us, l.P999Us, l.MaxUs
	}
	for name, c := range r.BPF {
		if c.Runs > 0 {
			m["bpf_"+name+"_ns_per_run"] = c.NsPerRun
		}
		// What the program costs each packet the applications got: the
		// guard's poll program runs for every NAPI poll on the machine,
		// several times a packet.
		if r.PPS > 0 && r.WindowS > 0 {
			m["bpf_"+name+"_ns_per_packet"] = float64(c.TimeNs) / (r.PPS * r.WindowS)
		}
	}
	if f := r.Falcon; f != nil {
		m["falcon_on_path_pct"], m["falcon_engaged_pct"] = f.OnPathPct, f.EngagedPct
		m["falcon_switches"], m["falcon_tests"] = float64(f.Comebacks+f.StandDowns), float64(f.Tests)
		if f.Probes != nil && f.Thin != nil {
			m["falcon_tests_begun"], m["falcon_tests_thin"] = float64(*f.Probes), float64(*f.Thin)
		}
	}
	if pct, ok := FastHitPct(r.FastPath); ok {
		m["fastpath_hit_pct"] = pct
	}
	perS := func(n uint64) float64 {
		if r.WindowS <= 0 {
			return 0
		}
		return float64(n) / r.WindowS
	}
	for cpu, w := range r.CPU {
		p := fmt.Sprintf("cpu%d_", cpu)
		u := w.Usage
		m[p+"usr"], m[p+"sys"], m[p+"soft"], m[p+"irq"], m[p+"idle"] = u.Usr, u.Sys, u.Soft, u.IRQ, u.Idle
		m[p+"busy"] = u.Busy()
		m[p+"net_rx"], m[p+"res"], m[p+"received_rps"] = perS(w.NetRX), perS(w.RES), perS(w.ReceivedRPS)
		m[p+"softnet_dropped"], m[p+"time_squeeze"] = float64(w.SoftnetDropped), float64(w.TimeSqueeze)
	}
	workloadMetrics(r, m)
	return m
}

// Summarize fills r.Summary from r.Runs. A metric missing from some runs
// (a CPU that went offline) is summarised over the runs that have it.
func (r *Result) Summarize() {
	values := map[string][]float64{}
	for _, run := range r.Runs {
		for k, v := range Metrics(run) {
			values[k] = append(values[k], v)
		}
	}
	r.Summary = map[string]stats.Summary{}
	for k, vs := range values {
		r.Summary[k] = stats.Summarize(vs)
	}
}

// NormalizedMetrics are divided by the baseline's: throughput up is better,
// latency and the CPU all CPUs spent (cpu_total_busy, what the rates
// workloads are judged by) down are better (a ratio below 1 is then a gain).
var NormalizedMetrics = []string{"pps", "gbps", "lat_avg_us", "lat_p50_us", "lat_p99_us", "cpu_total_busy"}

// Normalize sets Baseline and Normalized of every result. baseline is
// "auto" or "layout/mode". auto takes host/vanilla of the same workload,
// size and flows when there is one, else vanilla of the same layout. A
// result that is its own baseline is divided by its own mean only, so its
// interval is its relative spread, not that counted twice.
func Normalize(results []Result, baseline string) {
	type key struct {
		layout, mode, workload string
		size, flows            int
		rate                   string
	}
	idx := map[key]int{}
	for i, r := range results {
		idx[key{r.Layout, r.Mode, r.Workload, r.Size, r.Flows, offeredSpec(r)}] = i
	}
	for i := range results {
		r := &results[i]
		r.Baseline, r.Normalized, r.Paired = "", nil, false
		var cands []string
		if baseline == "auto" {
			cands = []string{"host/vanilla", r.Layout + "/vanilla"}
		} else {
			cands = []string{baseline}
		}
		for _, c := range cands {
			l, m := splitConfig(c)
			j, ok := idx[key{l, m, r.Workload, r.Size, r.Flows, offeredSpec(*r)}]
			if !ok || len(results[j].Runs) == 0 {
				continue
			}
			b := &results[j]
			r.Baseline = c
			r.Normalized = map[string]stats.Summary{}
			if j != i && r.Testbed == b.Testbed {
				if n := PairedRatios(r, b); n != nil {
					r.Normalized, r.Paired = n, true
					break
				}
			}
			for _, k := range NormalizedMetrics {
				x, okx := r.Summary[k]
				base, okb := b.Summary[k]
				if !okx || !okb || x.N == 0 {
					continue
				}
				if j == i {
					base = stats.Summary{Mean: base.Mean}
				}
				r.Normalized[k] = stats.Normalize(x, base)
			}
			break
		}
	}
}

// PairedRatios divides each run of r by b's run of the same round, where
// both ran interleaved on one testbed, and summarises the ratios by their
// geometric mean; nil when no round pairs up.
func PairedRatios(r, b *Result) map[string]stats.Summary {
	ratios := RoundRatios(r, b)
	if len(ratios) == 0 {
		return nil
	}
	out := map[string]stats.Summary{}
	for k, vs := range ratios {
		out[k] = stats.GeoSummarize(rounds(vs))
	}
	return out
}

// RoundRatio is one run of a result divided by its baseline's run of the
// same round (--interleave): the two ran back to back on one testbed.
type RoundRatio struct {
	Round int
	Ratio float64
}

// RoundRatios are r's runs divided by b's of the same round, by metric
// (NormalizedMetrics), in r's run order.
func RoundRatios(r, b *Result) map[string][]RoundRatio {
	base := map[int]map[string]float64{}
	for _, run := range b.Runs {
		if run.Round > 0 {
			base[run.Round] = Metrics(run)
		}
	}
	ratios := map[string][]RoundRatio{}
	for _, run := range r.Runs {
		bm, ok := base[run.Round]
		if run.Round == 0 || !ok {
			continue
		}
		m := Metrics(run)
		for _, k := range NormalizedMetrics {
			x, okx := m[k]
			y, oky := bm[k]
			if okx && oky && y != 0 {
				ratios[k] = append(ratios[k], RoundRatio{run.Round, x / y})
			}
		}
	}
	return ratios
}

func rounds(rs []RoundRatio) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.Ratio
	}
	return out
}

func splitConfig(s string) (layout, mode string) {
	layout, mode, ok := strings.Cut(s, "/")
	if !ok {
		mode = Vanilla
	}
	return layout, mode
}

// CPUsOf lists the CPUs that appear in any run of the results, sorted.
func CPUsOf(results []Result) []int {
	set := map[int]bool{}
	for _, r := range results {
		for _, run := range r.Runs {
			for c := range run.CPU {
				set[c] = true
			}
		}
	}
	var out []int
	for c := range set {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// overloadMetrics: the rate the search found, and how many steps it took.
func overloadMetrics(r Run, m map[string]float64) {
	if o := r.Overload; o != nil {
		m["overload_rate_pps"] = o.RatePPS
		m["overload_steps"] = float64(len(o.Steps))
	}
}

// hotspotMetrics: the flows' received rates before and after the switch,
// the heavy flow's and the light ones' apart, in Gbit/s, and for UDP in
// datagrams/s too.
func hotspotMetrics(r Run, m map[string]float64) {
	h := r.Hotspot
	if h == nil {
		return
	}
	var lightBefore, lightAfter, heavyBefore, heavyAfter [2]float64 // pps, Gbit/s
	for _, f := range h.Flows {
		if f.Heavy {
			heavyBefore = [2]float64{heavyBefore[0] + f.BeforePPS, heavyBefore[1] + f.BeforeGbps}
			heavyAfter = [2]float64{heavyAfter[0] + f.AfterPPS, heavyAfter[1] + f.AfterGbps}
		} else {
			lightBefore = [2]float64{lightBefore[0] + f.BeforePPS, lightBefore[1] + f.BeforeGbps}
			lightAfter = [2]float64{lightAfter[0] + f.AfterPPS, lightAfter[1] + f.AfterGbps}
		}
	}
	for i, unit := range []string{"pps", "gbps"} {
		if unit == "pps" && h.Protocol == "TCP" {
			continue
		}
		m["hotspot_heavy_before_"+unit], m["hotspot_heavy_after_"+unit] = heavyBefore[i], heavyAfter[i]
		m["hotspot_light_before_"+unit], m["hotspot_light_after_"+unit] = lightBefore[i], lightAfter[i]
		m["hotspot_after_"+unit] = heavyAfter[i] + lightAfter[i]
	}
}

// cpuTotals adds the machine's CPU time summed over its CPUs to a run's
// metrics, in percent of one CPU (200 is two CPUs busy throughout), as
// FALCON's Fig. 19 (a) plots total CPU usage, and the NET_RX softirqs
// raised per second on all CPUs, its Fig. 19 (b). cpu_total_busy is by
// the clock (Run.BusyPct, cpuBusy) where the run has it, cpuN_busy_clock
// each CPU's; the usr/sys/soft/irq totals are the kernel's tick samples
// (cpu_total_sampled_busy their sum).
func cpuTotals(r Run, m map[string]float64) {
	if len(r.CPU) == 0 {
		return
	}
	var usr, sys, soft, irq, busy float64
	var netRX uint64
	for _, w := range r.CPU {
		usr, sys, soft, irq, busy = usr+w.Usage.Usr, sys+w.Usage.Sys, soft+w.Usage.Soft, irq+w.Usage.IRQ, busy+w.Usage.Busy()
		netRX += w.NetRX
	}
	m["cpu_total_usr"], m["cpu_total_sys"], m["cpu_total_soft"], m["cpu_total_irq"] = usr, sys, soft, irq
	m["cpu_total_sampled_busy"], m["cpu_total_busy"] = busy, busy
	if len(r.BusyPct) > 0 {
		clock := 0.0
		for cpu, b := range r.BusyPct {
			m[fmt.Sprintf("cpu%d_busy_clock", cpu)] = b
			clock += b
		}
		m["cpu_total_busy"] = clock
	}
	if r.WindowS > 0 {
		m["net_rx_per_s"] = float64(netRX) / r.WindowS
	}
}

// workloadMetrics adds the new workloads' figures to Metrics: CPU totals
// for every run, the rate the overload search found, the hotspot's halves.
func workloadMetrics(r Run, m map[string]float64) {
	cpuTotals(r, m)
	overloadMetrics(r, m)
	hotspotMetrics(r, m)
}

// offeredSpec is a result's rate, what tells its cases apart ("" for the
// workloads without one).
func offeredSpec(r Result) string {
	if r.Offered == nil {
		return ""
	}
	return r.Offered.Spec
}

// BaselineOf is the result r was divided by (its Baseline), nil if none.
func BaselineOf(results []Result, r *Result) *Result {
	if r.Baseline == "" {
		return nil
	}
	l, m := splitConfig(r.Baseline)
	for i := range results {
		b := &results[i]
		if b.Layout == l && b.Mode == m && b.Workload == r.Workload && b.Size == r.Size && b.Flows == r.Flows && offeredSpec(*b) == offeredSpec(*r) {
			return b
		}
	}
	return nil
}

// FastHitPct is the share of the packets the fast path looked at (a
// Run.FastPath) that it carried; false where it looked at none.
func FastHitPct(c map[string]uint64) (float64, bool) {
	hit := c["ingress_hit"] + c["egress_hit"]
	all := hit + c["ingress_miss"] + c["egress_miss"]
	for _, k := range datapath.FastSlowReasons() {
		all += c[k]
	}
	if all == 0 {
		return 0, false
	}
	return 100 * float64(hit) / float64(all), true
}
