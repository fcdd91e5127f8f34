package bench

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/report"
	"github.com/falconnet/falcon/lab/schema"
)

// barCharts is WriteSVG's bar chart of the results no sweep draws, with
// the papers' ratios marked.
func barCharts(f *schema.File) []report.Chart {
	in := swept(f)
	var rest []schema.Result
	for i, r := range f.Results {
		if !in[i] {
			rest = append(rest, r)
		}
	}
	c := headlineBars(f, rest, true)
	c.minWidth = pageMinWidth
	if len(c.groups) == 0 {
		return nil
	}
	return []report.Chart{{Title: "Headline metric relative to the baseline", SVG: c.svg()}}
}

// pageMinWidth is the narrowest a chart on the page is drawn: two narrow
// ones fit side by side.
const pageMinWidth = 480

// latencyMetrics are the latency percentiles a run may record, as the
// latency chart names them.
var latencyMetrics = []struct{ key, name string }{
	{"lat_avg_us", "average"}, {"lat_p50_us", "p50"}, {"lat_p90_us", "p90"}, {"lat_p99_us", "p99"}, {"lat_p999_us", "p99.9"},
}

// latencyCharts draws, per workload that records latency and is not a
// sweep, its percentiles in µs: groups of bars per percentile (and size,
// flows or rate where those vary), a colour per layout/mode.
func latencyCharts(f *schema.File) []report.Chart {
	in := swept(f)
	var workloads []string
	for i, r := range f.Results {
		if x, ok := r.Summary["lat_p99_us"]; ok && x.N > 0 && !in[i] {
			workloads = appendUnique(workloads, r.Workload)
		}
	}
	var out []report.Chart
	for _, w := range workloads {
		var rs []schema.Result
		for i, r := range f.Results {
			if r.Workload == w && !in[i] && r.Summary["lat_p99_us"].N > 0 {
				rs = append(rs, r)
			}
		}
		vary := map[string]bool{}
		for _, d := range sweepDims {
			var v []int
			for _, r := range rs {
				v = appendUnique(v, d.of(r))
			}
			vary[d.name] = len(v) > 1
		}
		c := barChart{title: fmt.Sprintf("%s: latency percentiles (µs)", w),
			how: "mean ± 95 % CI (Student t) over the runs; " + latencyWhat(w), foot: footLine(f), floor: 1, minWidth: pageMinWidth,
			valueFmt: func(v float64) string { return trimFloat(roundSig(v, 3)) }}
		groups := map[string]*barGroup{}
		for _, lm := range latencyMetrics {
			for _, r := range rs {
				x, ok := r.Summary[lm.key]
				if !ok || x.N == 0 {
					continue
				}
				var sub []string
				for _, d := range sweepDims {
					if vary[d.name] {
						sub = append(sub, d.format(d.of(r)))
					}
				}
				key := lm.name + " " + strings.Join(sub, " ")
				g := groups[key]
				if g == nil {
					g = &barGroup{label: lm.name, sub: strings.Join(sub, " ")}
					groups[key] = g
					c.groups = append(c.groups, g)
				}
				cfg := r.Layout + "/" + r.Mode
				c.configs = appendUnique(c.configs, cfg)
				g.bars = append(g.bars, bar{config: cfg, value: x})
			}
		}
		if len(c.groups) > 0 {
			out = append(out, report.Chart{Title: c.title, SVG: c.svg()})
		}
	}
	return out
}

// latencyWhat says what a workload's latency is.
func latencyWhat(workload string) string {
	switch workload {
	case "memcached":
		return "each operation's round trip (memcaslap; interpolated in its power-of-two buckets)"
	case "web":
		return "each request's round trip (wrk)"
	}
	return "sockperf's one-way latency (half the round trip)"
}

// cpuParts are the stacked layers of a CPU's time; "other" is busy time
// none of them (steal, guest).
var cpuParts = []stackPart{{"usr", "#0072B2"}, {"sys", "#E69F00"}, {"softirq", "#D55E00"}, {"irq", "#CC79A7"}, {"other", "#999999"}}

// cpuGroupsPerChart keeps a CPU chart readable: more cases than this are
// drawn over several charts.
const cpuGroupsPerChart = 12

// cpuCharts draws per workload where each CPU's time went over the
// windows (usr, sys, softirq, irq, stacked; mean of the runs), a group of
// bars per case, with the busy time's 95 % interval as the whisker. Files
// without per-CPU usage (Run.CPU) get none.
func cpuCharts(f *schema.File) []report.Chart {
	cpus := schema.CPUsOf(f.Results)
	if len(cpus) == 0 {
		return nil
	}
	var workloads []string
	for _, r := range f.Results {
		workloads = appendUnique(workloads, r.Workload)
	}
	var out []report.Chart
	for _, w := range workloads {
		var groups []stackGroup
		for _, r := range f.Results {
			if r.Workload != w || len(r.Runs) == 0 {
				continue
			}
			sub := FormatSize(r.Size)
			if r.Flows > 1 {
				sub += fmt.Sprintf(" ×%d", r.Flows)
			}
			if r.Rate > 0 {
				sub += " @" + siShort(float64(r.Rate)) + "/s"
			}
			g := stackGroup{label: r.Layout + "/" + r.Mode, sub: sub}
			for _, c := range cpus {
				p := fmt.Sprintf("cpu%d_", c)
				busy, ok := r.Summary[p+"busy"]
				if !ok {
					continue
				}
				b := stackBar{name: fmt.Sprint(c), total: busy}
				sum := 0.0
				for _, k := range []string{"usr", "sys", "soft", "irq"} {
					v := r.Summary[p+k].Mean
					b.parts = append(b.parts, v)
					sum += v
				}
				b.parts = append(b.parts, max(busy.Mean-sum, 0))
				g.bars = append(g.bars, b)
			}
			if len(g.bars) > 0 {
				groups = append(groups, g)
			}
		}
		for n := 0; n < len(groups); n += cpuGroupsPerChart {
			part := groups[n:min(n+cpuGroupsPerChart, len(groups))]
			title := fmt.Sprintf("%s: CPU time per core", w)
			if len(groups) > cpuGroupsPerChart {
				title += fmt.Sprintf(" (%d/%d)", n/cpuGroupsPerChart+1, (len(groups)+cpuGroupsPerChart-1)/cpuGroupsPerChart)
			}
			c := stackChart{title: title, parts: cpuParts, groups: part, ymax: 100, barName: "CPU",
				sub:  "% of the window per CPU (bars numbered), mean of the runs; whisker: busy, 95 % CI",
				foot: footLine(f) + fmt.Sprintf("; senders on CPU %s, receivers on CPU %s", cpuset.Format(f.Config.SenderCPUs), cpuset.Format(f.Config.ReceiverCPUs))}
			out = append(out, report.Chart{Title: title, SVG: c.svg()})
		}
	}
	return out
}
