package render

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/lab/report"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
	"github.com/falconnet/falcon/lab/workload"
)

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
	{"size", func(r schema.Result) int { return r.Size }, workload.FormatSize},
	{"rate", func(r schema.Result) int { return r.Rate }, func(n int) string { return siShort(float64(n)) + "/s" }},
}

// sweepsOf finds f's sweeps, a workload at a time.
func sweepsOf(f *schema.File) []sweep {
	var workloads []string
	byWorkload := map[string][]int{}
	for i, r := range f.Results {
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], i)
	}
	var out []sweep
	for _, w := range workloads {
		idx := byWorkload[w]
		distinct := func(of func(schema.Result) int) []int {
			var v []int
			for _, i := range idx {
				if !slices.Contains(v, of(f.Results[i])) {
					v = append(v, of(f.Results[i]))
				}
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
func axisLabel(f *schema.File, name, axis string) string {
	switch axis {
	case "flows":
		w, _ := workload.Lookup(name)
		switch {
		case f.Config.ContainersPerFlow:
			return "replicas (client/server container pairs)"
		case w.FlowsAre != "":
			return w.FlowsAre
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
			if !slices.Contains(values[k], v) {
				values[k] = append(values[k], v)
			}
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
		out = append(out, sweepChartsOf(f, sw)...)
	}
	return out
}

// sweepChartsOf draws one sweep twice: its headline relative to the
// baseline, and as measured.
func sweepChartsOf(f *schema.File, sw sweep) []report.Chart {
	h := workload.JudgedBy(sw.workload)
	ratio, abs, xi := sweepFrames(f, sw, h)
	metrics := []string{h}
	if h == "lat_p99_us" {
		abs.sub += "; dashed: p50"
		metrics = []string{"lat_p99_us", "lat_p50_us"}
	}
	ss := sweepSeries{xi: xi, headline: h, metrics: metrics, ratio: map[string]*lineSeries{}, abs: map[string]*lineSeries{}}
	for k, i := range sw.results {
		ss.add(f.Results[i], sw.series[k], sw.x[k], &abs)
	}
	for n, name := range ss.names {
		color := palette[n%len(palette)]
		if s := ss.ratio[name]; s != nil {
			s.color = color
			ratio.series = append(ratio.series, s)
		}
		for _, m := range metrics {
			if s := ss.abs[name+"\x00"+m]; s != nil {
				s.color = color
				abs.series = append(abs.series, s)
			}
		}
	}
	var out []report.Chart
	if len(ratio.series) > 0 {
		out = append(out, report.Chart{Title: ratio.title, SVG: ratio.svg()})
	}
	if len(abs.series) > 0 {
		out = append(out, report.Chart{Title: abs.title, SVG: abs.svg()})
	}
	return out
}

// sweepFrames are a sweep's two charts without their lines, and the index
// of each x on their axis.
func sweepFrames(f *schema.File, sw sweep, h string) (ratio, abs lineChart, xi map[int]int) {
	xi = map[int]int{}
	var c lineChart
	for i, x := range sw.xs {
		xi[x] = i
		c.xs = append(c.xs, sweepDimFormat(sw.axis, x))
	}
	c.xLabel, c.foot, c.minWidth = sw.xLabel, footLine(f), pageMinWidth
	ratio, abs = c, c
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
	return ratio, abs, xi
}

// sweepSeries gathers a sweep's lines: ratio's by series name, abs's by
// name and metric.
type sweepSeries struct {
	xi         map[int]int
	headline   string
	metrics    []string
	ratio, abs map[string]*lineSeries
	names      []string // in the order met
}

// add puts result r of series name at x on the lines; a reference without
// the swept setting (x < 0) is a line across abs.
func (ss *sweepSeries) add(r schema.Result, name string, x int, abs *lineChart) {
	h := ss.headline
	if !slices.Contains(ss.names, name) {
		ss.names = append(ss.names, name)
	}
	if x < 0 {
		if v, ok := r.Summary[h]; ok && v.N > 0 {
			_, hi := v.Interval()
			abs.hlines = append(abs.hlines, hLine{name: name, value: v.Mean, hi: hi, tip: name + ": " + pm(v, 3, "")})
		}
		return
	}
	if v, ok := r.Normalized[h]; ok {
		s := ss.ratio[name]
		if s == nil {
			s = &lineSeries{name: name, points: map[int]stats.Summary{}, marks: map[int][]paperMark{}}
			ss.ratio[name] = s
		}
		s.points[ss.xi[x]] = v
		s.marks[ss.xi[x]] = headlineMarks(r)
	}
	for mi, m := range ss.metrics {
		v, ok := r.Summary[m]
		if !ok || v.N == 0 {
			continue
		}
		key := name + "\x00" + m
		s := ss.abs[key]
		if s == nil {
			s = &lineSeries{name: name, points: map[int]stats.Summary{}, dashed: mi > 0}
			if len(ss.metrics) > 1 {
				s.name += " " + strings.TrimSuffix(strings.TrimPrefix(m, "lat_"), "_us")
			}
			ss.abs[key] = s
		}
		s.points[ss.xi[x]] = v
	}
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
