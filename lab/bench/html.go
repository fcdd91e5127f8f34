package bench

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/report"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
)

// The report as one self-contained HTML page (falcon report --html): a
// section per results file (or falcon sim prediction, lab/sim) with
// its machine and method, its charts and its table. The charts are inline
// SVG drawn by chart.go; the page loads nothing (no script, font, style
// sheet or image from anywhere), so it opens offline.

// ChartKind draws one kind of chart from a results file; Draw returns
// nothing when the file has nothing of its kind. A section shows the
// charts of every kind, in the order they were registered.
type ChartKind struct {
	Name string
	Draw func(f *schema.File) []report.Chart
}

var chartKinds []ChartKind

// RegisterChartKind adds a kind of chart to every results file's section
// (from an init function, as the kinds below are): a new workload whose
// figure is of its own kind (a time series, say) plugs its drawing in
// here, with the pieces of chart.go.
func RegisterChartKind(k ChartKind) { chartKinds = append(chartKinds, k) }

func init() {
	RegisterChartKind(ChartKind{"batch", batchCharts})
	RegisterChartKind(ChartKind{"sweep", sweepCharts})
	RegisterChartKind(ChartKind{"bars", barCharts})
	RegisterChartKind(ChartKind{"latency", latencyCharts})
	RegisterChartKind(ChartKind{"cpu", cpuCharts})
}

// FileSection is the section of the results file read from source.
func FileSection(source string, f *schema.File) (report.HTMLSection, error) {
	var body strings.Builder
	if err := WriteTable(&body, f); err != nil {
		return report.HTMLSection{}, err
	}
	s := report.HTMLSection{Title: filepath.Base(source), Source: source, Facts: fileFacts(f), Body: body.String()}
	if p := f.Config.Preset; p != "" {
		s.Title = "preset " + p + ": " + s.Title
		s.Subtitle = presets[p].summary
	}
	switch {
	case f.Interrupted:
		s.Banner = "Interrupted: the results are incomplete."
	case f.Partial:
		s.Banner = "Partial: saved while the bench was still running."
	}
	for _, k := range chartKinds {
		for _, c := range k.Draw(f) {
			if c.Kind == "" {
				c.Kind = k.Name
			}
			s.Charts = append(s.Charts, c)
		}
	}
	return s, nil
}

// fileFacts states where and how f was measured.
func fileFacts(f *schema.File) []report.Fact {
	m, c := f.Machine, f.Config
	cpus := fmt.Sprintf("%d", m.Cores)
	if m.OnlineCPUs != "" {
		cpus += " (online " + m.OnlineCPUs + ")"
	}
	virt := m.Virt
	switch virt {
	case "":
		virt = "not recorded"
	case "none":
		virt = "none (bare metal)"
	}
	kernel := orDash(m.Kernel)
	if m.KernelBuild != "" {
		kernel += " (" + m.KernelBuild + ")"
	}
	facts := []report.Fact{
		{Name: "Machine", Value: fmt.Sprintf("%s, %s CPUs, %s, %s", orDash(m.CPUModel), cpus, memString(m.MemoryBytes), orDash(m.Arch))},
		{Name: "Kernel", Value: kernel},
		{Name: "OS", Value: orDash(m.OS)},
		{Name: "Virtualisation", Value: virt},
		{Name: "Host", Value: orDash(m.Hostname)},
	}
	if len(m.Tools) > 0 {
		var t []string
		for k, v := range m.Tools {
			t = append(t, k+": "+v)
		}
		sort.Strings(t)
		facts = append(facts, report.Fact{Name: "Tools", Value: strings.Join(t, "; ")})
	}
	stat := "mean ± 95 % CI (Student t) over the runs; ratios: mean over the baseline's mean, errors propagated"
	if c.Interleave {
		stat = "mean ± 95 % CI (Student t) over the runs; ratios: geometric mean of each run over the baseline's run of the same round, 95 % interval (Student t on the logarithms)"
	}
	sender := "the tools' clients"
	if c.Sender == SenderKernel {
		sender = "falcon's kernel sender (XDP, live frames)"
	}
	order := "each layout × mode on a fresh testbed, its runs one after another"
	if c.Interleave {
		order = "interleaved: the modes of a layout took turns run by run on one testbed"
	}
	facts = append(facts,
		report.Fact{Name: "Runs", Value: fmt.Sprintf("%d run(s) of %s each after %s warm-up; %s", c.Runs, c.Duration, c.Warmup, order)},
		report.Fact{Name: "Statistics", Value: stat},
		report.Fact{Name: "Placement", Value: fmt.Sprintf("senders on CPU %s, receivers on CPU %s; sender: %s", cpuset.Format(c.SenderCPUs), cpuset.Format(c.ReceiverCPUs), sender)},
		report.Fact{Name: "Cases", Value: fmt.Sprintf("layouts %s; modes %s; workloads %s", strings.Join(c.Layouts, ", "), strings.Join(c.Modes, ", "), strings.Join(c.Workloads, ", "))},
		report.Fact{Name: "Command", Value: orDash(f.Command)},
	)
	when := "not recorded"
	if !f.Started.IsZero() {
		when = f.Started.UTC().Format("2006-01-02 15:04:05 MST")
		if !f.Finished.IsZero() {
			when += " to " + f.Finished.UTC().Format("2006-01-02 15:04:05 MST")
		}
	}
	return append(facts, report.Fact{Name: "When", Value: when + "; falcon " + orDash(f.FalconVersion)})
}

// headlineMarks are the papers' ratios comparable to r's headline ratio.
func headlineMarks(r schema.Result) []paperMark {
	var out []paperMark
	for _, pc := range paperClaims(r) {
		if pc.metric != headline(r.Workload) || pc.Value.Unit != "×" {
			continue
		}
		out = append(out, paperMark{lo: pc.Value.Value, hi: pc.Value.Max, label: claimText(pc.Claim)})
	}
	return out
}

// batchCharts is MFLOW Fig. 7's chart (writeBatchSVG) where f is a batch
// sweep.
func batchCharts(f *schema.File) []report.Chart {
	batches := batchSweep(f)
	if batches == nil {
		return nil
	}
	var b strings.Builder
	if writeBatchSVG(&b, f, batches) != nil {
		return nil
	}
	return []report.Chart{{Title: "Out-of-order segments against the batch size", SVG: b.String()}}
}

// sweep is the results of one workload that vary over one dimension with
// three values or more: drawn as lines over it, as the papers draw sizes,
// flows, replicas, rates and settings.
type sweep struct {
	workload string
	axis     string // "flows", "size", "rate", or a mode setting ("batch", "threshold")
	xLabel   string
	xs       []int    // sorted
	results  []int    // indices into f.Results
	x        []int    // each result's x; -1 for a reference without the setting
	series   []string // each result's series
}

// sweepDims are the dimensions a sweep may run over, in the order they
// are tried.
var sweepDims = []struct {
	name   string
	of     func(schema.Result) int
	format func(int) string
}{
	{"flows", func(r schema.Result) int { return r.Flows }, strconv.Itoa},
	{"size", func(r schema.Result) int { return r.Size }, FormatSize},
	{"rate", func(r schema.Result) int { return r.Rate }, func(n int) string { return siShort(float64(n)) + "/s" }},
}

// sweepsOf finds f's sweeps, a workload at a time.
func sweepsOf(f *schema.File) []sweep {
	var workloads []string
	byWorkload := map[string][]int{}
	for i, r := range f.Results {
		workloads = appendUnique(workloads, r.Workload)
		byWorkload[r.Workload] = append(byWorkload[r.Workload], i)
	}
	var out []sweep
	for _, w := range workloads {
		idx := byWorkload[w]
		distinct := func(of func(schema.Result) int) []int {
			var v []int
			for _, i := range idx {
				v = appendUnique(v, of(f.Results[i]))
			}
			sort.Ints(v)
			return v
		}
		sw := sweep{workload: w, results: idx}
		for _, d := range sweepDims {
			if xs := distinct(d.of); len(xs) >= 3 {
				sw.axis, sw.xs = d.name, xs
				for _, i := range idx {
					sw.x = append(sw.x, d.of(f.Results[i]))
				}
				break
			}
		}
		setting := ""
		if sw.axis == "" {
			setting, sw.xs = settingSweep(f, idx)
			if setting == "" {
				continue
			}
			sw.axis = setting
			for _, i := range idx {
				v, ok := numericSettings(f.Results[i].Mode)[setting]
				if !ok {
					v = -1
				}
				sw.x = append(sw.x, v)
			}
		}
		sw.xLabel = axisLabel(f, w, sw.axis)
		for _, i := range idx {
			r := f.Results[i]
			mode := r.Mode
			if setting != "" {
				mode = withoutSetting(mode, setting)
			}
			name := r.Layout + "/" + mode
			for _, d := range sweepDims {
				if d.name != sw.axis && len(distinct(d.of)) > 1 {
					name += " " + d.format(d.of(r))
				}
			}
			sw.series = append(sw.series, name)
		}
		out = append(out, sw)
	}
	return out
}

// axisLabel names a sweep's x axis as the paper would.
func axisLabel(f *schema.File, workload, axis string) string {
	switch axis {
	case "flows":
		switch {
		case f.Config.ContainersPerFlow:
			return "replicas (client/server container pairs)"
		case workload == "memcached":
			return "clients (10 connections each)"
		case workload == "web":
			return "connections"
		}
		return "flows"
	case "size":
		return "message size"
	case "rate":
		return "offered rate (messages/s)"
	case "batch":
		return "batch size (packets per micro-flow)"
	}
	return "mode setting " + axis
}

var settingRe = regexp.MustCompile(`^([a-z-]+)=([0-9]+)$`)

// numericSettings are a mode spec's settings with a number for a value:
// {"batch": 64, "elephant": 0} of "mflow:batch=64,elephant=0@b".
func numericSettings(spec string) map[string]int {
	base, _, _ := strings.Cut(spec, "@")
	_, settings, _ := strings.Cut(base, ":")
	out := map[string]int{}
	for _, kv := range strings.Split(settings, ",") {
		if m := settingRe.FindStringSubmatch(kv); m != nil {
			if n, err := strconv.Atoi(m[2]); err == nil {
				out[m[1]] = n
			}
		}
	}
	return out
}

// settingSweep is the mode setting that takes three values or more among
// the results idx, and its values; "" when none does.
func settingSweep(f *schema.File, idx []int) (string, []int) {
	values := map[string][]int{}
	for _, i := range idx {
		for k, v := range numericSettings(f.Results[i].Mode) {
			values[k] = appendUnique(values[k], v)
		}
	}
	var keys []string
	for k, v := range values {
		if len(v) >= 3 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "", nil
	}
	sort.Strings(keys)
	xs := values[keys[0]]
	sort.Ints(xs)
	return keys[0], xs
}

// withoutSetting is a mode spec without one setting: withoutBatch for any key.
func withoutSetting(spec, key string) string {
	base, label, labelled := strings.Cut(spec, "@")
	name, settings, _ := strings.Cut(base, ":")
	var keep []string
	for _, kv := range strings.Split(settings, ",") {
		if kv != "" && !strings.HasPrefix(kv, key+"=") {
			keep = append(keep, kv)
		}
	}
	out := name
	if len(keep) > 0 {
		out += ":" + strings.Join(keep, ",")
	}
	if labelled {
		out += "@" + label
	}
	return out
}

// swept marks the results that a sweep draws.
func swept(f *schema.File) map[int]bool {
	out := map[int]bool{}
	for _, sw := range sweepsOf(f) {
		for _, i := range sw.results {
			out[i] = true
		}
	}
	return out
}

// sweepCharts draws each sweep twice: the headline ratio to the baseline
// with the papers' ratios marked, and the headline metric itself (for
// latency its p50 dashed beside the p99).
func sweepCharts(f *schema.File) []report.Chart {
	var out []report.Chart
	for _, sw := range sweepsOf(f) {
		h := headline(sw.workload)
		xi := map[int]int{}
		var c lineChart
		for i, x := range sw.xs {
			xi[x] = i
			c.xs = append(c.xs, sweepDimFormat(sw.axis, x))
		}
		c.xLabel, c.foot, c.minWidth = sw.xLabel, footLine(f), pageMinWidth
		ratio, abs := c, c
		ratio.title = fmt.Sprintf("%s: %s relative to the baseline, over %s", sw.workload, metricName(h), sw.xLabel)
		ratio.sub = "mean ± 95 % CI; dashed: the baseline (= 1); red: a paper's ratio for the same test"
		if f.Config.Interleave {
			ratio.sub = "geometric mean of the paired ratios, 95 % interval; dashed: the baseline (= 1); red: a paper's ratio for the same test"
		}
		ratio.floor, ratio.hlines = 1.2, []hLine{{name: "baseline", value: 1, tip: "the baseline"}}
		ratio.valueFmt = func(v float64) string { return fmt.Sprintf("%.2f", v) }
		abs.title = fmt.Sprintf("%s: %s over %s", sw.workload, metricName(h), sw.xLabel)
		abs.sub = "mean ± 95 % CI (Student t) over the runs"
		abs.valueFmt, abs.tick = func(v float64) string { return siShort(roundSig(v, 3)) }, siShort
		metrics := []string{h}
		if h == "lat_p99_us" {
			abs.sub += "; dashed: p50"
			metrics = []string{"lat_p99_us", "lat_p50_us"}
		}
		ratioSeries, absSeries := map[string]*lineSeries{}, map[string]*lineSeries{}
		var names []string
		for k, i := range sw.results {
			r, name := f.Results[i], sw.series[k]
			names = appendUnique(names, name)
			x := sw.x[k]
			if x < 0 { // a reference without the swept setting: a line across
				if v, ok := r.Summary[h]; ok && v.N > 0 {
					_, hi := v.Interval()
					abs.hlines = append(abs.hlines, hLine{name: name, value: v.Mean, hi: hi, tip: name + ": " + pm(v, 3, "")})
				}
				continue
			}
			if v, ok := r.Normalized[h]; ok {
				s := ratioSeries[name]
				if s == nil {
					s = &lineSeries{name: name, points: map[int]stats.Summary{}, marks: map[int][]paperMark{}}
					ratioSeries[name] = s
				}
				s.points[xi[x]] = v
				s.marks[xi[x]] = headlineMarks(r)
			}
			for mi, m := range metrics {
				v, ok := r.Summary[m]
				if !ok || v.N == 0 {
					continue
				}
				key := name + "\x00" + m
				s := absSeries[key]
				if s == nil {
					s = &lineSeries{name: name, points: map[int]stats.Summary{}, dashed: mi > 0}
					if len(metrics) > 1 {
						s.name += " " + strings.TrimSuffix(strings.TrimPrefix(m, "lat_"), "_us")
					}
					absSeries[key] = s
				}
				s.points[xi[x]] = v
			}
		}
		for n, name := range names {
			color := palette[n%len(palette)]
			if s := ratioSeries[name]; s != nil {
				s.color = color
				ratio.series = append(ratio.series, s)
			}
			for _, m := range metrics {
				if s := absSeries[name+"\x00"+m]; s != nil {
					s.color = color
					abs.series = append(abs.series, s)
				}
			}
		}
		if len(ratio.series) > 0 {
			out = append(out, report.Chart{Title: ratio.title, SVG: ratio.svg()})
		}
		if len(abs.series) > 0 {
			out = append(out, report.Chart{Title: abs.title, SVG: abs.svg()})
		}
	}
	return out
}

// metricName is a metric's name in a chart's title: the table's, or its key.
func metricName(k string) string {
	if n, ok := metricNames[k]; ok {
		return n
	}
	return k
}

func sweepDimFormat(axis string, x int) string {
	for _, d := range sweepDims {
		if d.name == axis {
			return d.format(x)
		}
	}
	return strconv.Itoa(x)
}

// roundSig rounds v to sig significant digits.
func roundSig(v float64, sig int) float64 {
	d := sigDecimals(v, sig)
	x, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', d, 64), 64)
	return x
}

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
