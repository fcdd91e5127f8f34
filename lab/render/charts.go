package render

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/report"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
	"github.com/falconnet/falcon/lab/workload"
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
			if !slices.Contains(workloads, r.Workload) {
				workloads = append(workloads, r.Workload)
			}
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
				if !slices.Contains(v, d.of(r)) {
					v = append(v, d.of(r))
				}
			}
			vary[d.name] = len(v) > 1
		}
		c := barChart{title: fmt.Sprintf("%s: latency percentiles (µs)", w),
			how: latencyHow(w), foot: footLine(f), floor: 1, minWidth: pageMinWidth,
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
				if !slices.Contains(c.configs, cfg) {
					c.configs = append(c.configs, cfg)
				}
				g.bars = append(g.bars, bar{config: cfg, value: x})
			}
		}
		if len(c.groups) > 0 {
			out = append(out, report.Chart{Title: c.title, SVG: c.svg()})
		}
	}
	return out
}

// latencyHow says how a workload's latency chart is drawn and what its
// latency is.
func latencyHow(name string) string {
	how := "mean ± 95 % CI (Student t) over the runs"
	if w, ok := workload.Lookup(name); ok && w.LatencyIs != "" {
		how += "; " + w.LatencyIs
	}
	return how
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
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	var out []report.Chart
	for _, w := range workloads {
		var groups []stackGroup
		for _, r := range f.Results {
			if r.Workload != w || len(r.Runs) == 0 {
				continue
			}
			sub := workload.FormatSize(r.Size)
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

// stackPart is one layer of a stacked bar.
type stackPart struct{ name, color string }

// stackBar is one stacked bar: a value per part, and the total's 95 %
// interval as its whisker.
type stackBar struct {
	name  string // under the bar: keep it short
	parts []float64
	total stats.Summary
}

type stackGroup struct {
	label, sub string
	bars       []stackBar
}

// stackChart draws groups of stacked bars on an axis of 0..ymax (100 for
// CPU shares).
type stackChart struct {
	title, sub string
	parts      []stackPart
	groups     []stackGroup
	ymax       float64
	barName    string // what a bar is, before its name in the tooltip: "CPU"
	foot       string
}

func (c stackChart) svg() string {
	const (
		barW, barGap, groupGap = 22.0, 4.0, 28.0
		left, right, top       = 64.0, 24.0, 72.0
		plotH, bottom          = 280.0, 76.0
	)
	plotW := groupGap
	for _, g := range c.groups {
		plotW += groupWidth(len(g.bars), barW, barGap, g.label, g.sub) + groupGap
	}
	var legend []legendEntry
	for _, p := range c.parts {
		legend = append(legend, legendEntry{name: p.name, color: p.color})
	}
	width := math.Max(420, math.Max(left+plotW+right, math.Max(left+legendWidth(legend), left+6.5*float64(len(c.sub)))+right))
	height := top + plotH + bottom
	a := newYScale(top, plotH, c.ymax)
	y := a.y
	var s strings.Builder
	svgOpen(&s, width, height)
	svgHeading(&s, left, c.title, c.sub)
	svgLegend(&s, left, legend)
	a.grid(&s, left, plotW)
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, left, top, top+plotH)
	gx := left + groupGap
	for _, g := range c.groups {
		gw := groupWidth(len(g.bars), barW, barGap, g.label, g.sub)
		x := gx + (gw-(float64(len(g.bars))*(barW+barGap)-barGap))/2
		for _, b := range g.bars {
			base := 0.0
			var tip []string
			for i, v := range b.parts {
				if v <= 0 {
					continue
				}
				fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="%s"/>`+"\n", x, y(base+v), barW, y(base)-y(base+v), c.parts[i].color)
				tip = append(tip, fmt.Sprintf("%s %.0f", c.parts[i].name, v))
				base += v
			}
			// The whole bar carries the tooltip: the parts are too thin to point at.
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"><title>%s %s, %s %s: %s; total %s</title></rect>`+"\n",
				x, top, barW, plotH, esc(g.label), esc(g.sub), esc(c.barName), esc(b.name), esc(strings.Join(tip, ", ")), esc(pm(b.total, 0, "")))
			if lo, hi := b.total.Interval(); hi > lo {
				whisker(&s, x+barW/2, y(math.Max(lo, 0)), y(math.Min(hi, a.ymax)))
			}
			fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="9">%s</text>`+"\n", x+barW/2, top+plotH+12, esc(b.name))
			x += barW + barGap
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text><text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n",
			gx+gw/2, top+plotH+30, esc(g.label), gx+gw/2, top+plotH+45, esc(g.sub))
		gx += gw + groupGap
	}
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, left+plotW, y(0), y(0))
	svgClose(&s, left, height, c.foot)
	return s.String()
}
