package render

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
	"github.com/falconnet/falcon/lab/workload"
)

// palette is colour-blind safe (Okabe–Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

// WriteSVG draws the normalised headline metric of every result (see
// headline) as bars with 95 % CI whiskers, grouped by workload, size and
// flows, one colour per layout/mode; a batch sweep (MFLOW Fig. 7, every
// mode vanilla or mflow with a batch) is drawn as out-of-order segments
// against the batch size instead (writeBatchSVG).
func WriteSVG(w io.Writer, f *schema.File) error {
	if batches := batchSweep(f); batches != nil {
		return writeBatchSVG(w, f, batches)
	}
	_, err := io.WriteString(w, headlineBars(f, f.Results, false).svg())
	return err
}

// headlineBars is the bar chart of the results' normalised headline
// metrics (WriteSVG's), with the papers' comparable ratios marked when
// marks is set.
func headlineBars(f *schema.File, results []schema.Result, marks bool) barChart {
	var groups []*barGroup
	byLabel := map[string]*barGroup{}
	var configs []string
	for _, r := range results {
		x, ok := r.Normalized[workload.JudgedBy(r.Workload)]
		if !ok {
			continue
		}
		sub := workload.FormatSize(r.Size)
		if r.Flows > 1 {
			sub += fmt.Sprintf(" ×%d", r.Flows)
		}
		if workload.IsRates(r.Workload) && r.Offered != nil {
			sub += " at " + r.Offered.Spec
		}
		sub += headlineNote[workload.JudgedBy(r.Workload)]
		key := r.Workload + " " + sub
		g := byLabel[key]
		if g == nil {
			g = &barGroup{label: r.Workload, sub: sub}
			byLabel[key] = g
			groups = append(groups, g)
		}
		cfg := r.Layout + "/" + r.Mode
		if !slices.Contains(configs, cfg) {
			configs = append(configs, cfg)
		}
		b := bar{config: cfg, value: x}
		if marks {
			b.marks = headlineMarks(r)
		}
		g.bars = append(g.bars, b)
	}
	how := "mean ± 95 % CI (Student t); for latency below 1 is faster"
	if f.Config.Interleave {
		how = "geometric mean of the runs paired with the baseline's, 95 % interval (Student t on the logarithms); for latency below 1 is faster"
	}
	return barChart{title: "Relative to the baseline (= 1): UDP packets/s, TCP Gbit/s, p99 latency", how: how,
		groups: groups, configs: configs, floor: 1.2, one: true, foot: footLine(f)}
}

// niceStep rounds a raw tick step up to 1, 2 or 5 × 10^k.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 0.2
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

func esc(s string) string { return html.EscapeString(s) }

// batchSweep gives the micro-flow batch of each result (0 for vanilla)
// when f is a batch sweep: TCP cases only, every mode vanilla or one that
// makes micro-flows (mflow:batch=N…), two batch sizes at least. nil
// otherwise.
func batchSweep(f *schema.File) []int {
	batches := make([]int, len(f.Results))
	sizes := map[int]bool{}
	for i, r := range f.Results {
		if !workload.IsTCP(r.Workload) {
			return nil
		}
		m, err := schema.ParseMode(r.Mode)
		switch {
		case err != nil:
			return nil
		case m.Vanilla:
		case m.Opts.Batch > 0:
			batches[i] = m.Opts.Batch
			sizes[m.Opts.Batch] = true
		default:
			return nil
		}
	}
	if len(sizes) < 2 {
		return nil
	}
	return batches
}

// ofoMetric is the out-of-order count of a TCP result: the receiver's
// TCPOFOQueue per window, iperf3's count in files from before Reordering.
func ofoMetric(r schema.Result) (stats.Summary, bool) {
	for _, k := range []string{"tcp_ofo_queue", "out_of_order"} {
		if x, ok := r.Summary[k]; ok && x.N > 0 {
			return x, true
		}
	}
	return stats.Summary{}, false
}

// writeBatchSVG draws MFLOW Fig. 7: the segments TCP's receiver queued out
// of order per window against the batch size, one line per case (layout,
// workload, size, flows) and mode apart from its batch, with vanilla's
// count of the case as a dashed grey line.
func writeBatchSVG(w io.Writer, f *schema.File, batches []int) error {
	type series struct {
		name   string
		points map[int]stats.Summary // batch → count
		gbps   map[int]float64
	}
	type vanillaLine struct {
		name string
		ofo  stats.Summary
	}
	var order []*series
	var vanillas []vanillaLine
	byName := map[string]*series{}
	var xs []int
	for i, r := range f.Results {
		x, ok := ofoMetric(r)
		if !ok {
			continue
		}
		name := fmt.Sprintf("%s %s %s", r.Layout, r.Workload, workload.FormatSize(r.Size))
		if r.Flows > 1 {
			name += fmt.Sprintf(" ×%d", r.Flows)
		}
		if batches[i] == 0 {
			vanillas = append(vanillas, vanillaLine{name + " " + r.Mode, x})
			continue
		}
		name += " " + withoutBatch(r.Mode)
		sr := byName[name]
		if sr == nil {
			sr = &series{name: name, points: map[int]stats.Summary{}, gbps: map[int]float64{}}
			byName[name] = sr
			order = append(order, sr)
		}
		sr.points[batches[i]], sr.gbps[batches[i]] = x, r.Summary["gbps"].Mean
		if !slices.Contains(xs, batches[i]) {
			xs = append(xs, batches[i])
		}
	}
	sort.Ints(xs)

	c := lineChart{title: "Out-of-order segments per batch size (MFLOW Fig. 7)",
		sub:    fmt.Sprintf("segments TCP's receiver queued out of order (TcpExt TCPOFOQueue) per %s window, mean ± 95 %% CI", f.Config.Duration),
		xLabel: "batch size (packets per micro-flow)", floor: 1, foot: footLine(f)}
	for _, b := range xs {
		c.xs = append(c.xs, fmt.Sprint(b))
	}
	for _, v := range vanillas {
		_, hi := v.ofo.Interval()
		c.hlines = append(c.hlines, hLine{name: v.name, value: v.ofo.Mean, hi: hi, tip: fmt.Sprintf("%s: %.0f", v.name, v.ofo.Mean)})
	}
	for _, sr := range order {
		ls := &lineSeries{name: sr.name, points: map[int]stats.Summary{}, tips: map[int]string{}}
		for i, b := range xs {
			if p, ok := sr.points[b]; ok {
				ls.points[i] = p
				ls.tips[i] = fmt.Sprintf("%s batch %d: %.0f out of order, %.3g Gbit/s", sr.name, b, p.Mean, sr.gbps[b])
			}
		}
		c.series = append(c.series, ls)
	}
	_, err := io.WriteString(w, c.svg())
	return err
}

// withoutBatch is a mode spec without its batch setting, what the points
// of one line of writeBatchSVG share: "mflow:batch=16,elephant=0@b" is
// "mflow:elephant=0@b".
func withoutBatch(spec string) string { return withoutSetting(spec, "batch") }
