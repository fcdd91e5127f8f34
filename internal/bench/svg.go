package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/stats"
)

// palette is colour-blind safe (Okabe–Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

type bar struct {
	config string // layout/mode
	value  stats.Summary
}

type barGroup struct {
	label, sub string // workload; size, flows
	bars       []bar
}

// width is the room a group takes: its bars, or its label if wider.
func (g *barGroup) width(barW, barGap float64) float64 {
	bars := float64(len(g.bars))*(barW+barGap) - barGap
	text := 7 * float64(max(len(g.label), len(g.sub)))
	return math.Max(bars, text)
}

// WriteSVG draws the normalised headline metric of every result (see
// headline) as bars with 95 % CI whiskers, grouped by workload, size and
// flows, one colour per layout/mode; a batch sweep (MFLOW Fig. 7, every
// mode vanilla or mflow with a batch) is drawn as out-of-order segments
// against the batch size instead (writeBatchSVG).
func WriteSVG(w io.Writer, f *File) error {
	if batches := batchSweep(f); batches != nil {
		return writeBatchSVG(w, f, batches)
	}
	var groups []*barGroup
	byLabel := map[string]*barGroup{}
	var configs []string
	for _, r := range f.Results {
		x, ok := r.Normalized[headline(r.Workload)]
		if !ok {
			continue
		}
		sub := FormatSize(r.Size)
		if r.Flows > 1 {
			sub += fmt.Sprintf(" ×%d", r.Flows)
		}
		sub += headlineNote[headline(r.Workload)]
		key := r.Workload + " " + sub
		g := byLabel[key]
		if g == nil {
			g = &barGroup{label: r.Workload, sub: sub}
			byLabel[key] = g
			groups = append(groups, g)
		}
		cfg := r.Layout + "/" + r.Mode
		configs = appendUnique(configs, cfg)
		g.bars = append(g.bars, bar{cfg, x})
	}
	color := map[string]string{}
	for i, c := range configs {
		color[c] = palette[i%len(palette)]
	}

	const (
		barW, barGap, groupGap = 30.0, 4.0, 36.0
		left, right, top       = 64.0, 24.0, 72.0
		plotH, bottom          = 280.0, 76.0
	)
	ymax := 1.2
	for _, g := range groups {
		for _, b := range g.bars {
			_, hi := b.value.Interval()
			ymax = math.Max(ymax, hi*1.1)
		}
	}
	step := niceStep(ymax / 5)
	ymax = math.Ceil(ymax/step) * step
	plotW := groupGap
	for _, g := range groups {
		plotW += g.width(barW, barGap) + groupGap
	}
	legendW := 0.0
	for _, c := range configs {
		legendW += 24 + 7*float64(len(c)) + 16
	}
	width := math.Max(640, math.Max(left+plotW+right, left+legendW+right))
	height := top + plotH + bottom
	y := func(v float64) float64 { return top + plotH - v/ymax*plotH }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%.0f" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", left, esc("Relative to the baseline (= 1): UDP packets/s, TCP Gbit/s, p99 latency"))
	how := "mean ± 95 % CI (Student t); for latency below 1 is faster"
	if f.Config.Interleave {
		how = "geometric mean of the runs paired with the baseline's, 95 % interval (Student t on the logarithms); for latency below 1 is faster"
	}
	fmt.Fprintf(&s, `<text x="%.0f" y="34" fill="#555">%s</text>`+"\n", left, esc(how))
	// Legend.
	lx := left
	for _, c := range configs {
		fmt.Fprintf(&s, `<rect x="%.1f" y="44" width="14" height="14" fill="%s"/><text x="%.1f" y="56">%s</text>`+"\n", lx, color[c], lx+18, esc(c))
		lx += 24 + 7*float64(len(c)) + 16
	}
	// Axis, grid and the line at 1.
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, left+plotW, y(v), y(v), left-6, y(v)+4, trimFloat(v))
	}
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="5,4"/>`+"\n", left, left+plotW, y(1), y(1))
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, left, top, top+plotH)
	// Bars, centred in their group's room.
	gx := left + groupGap
	for _, g := range groups {
		gw := g.width(barW, barGap)
		x := gx + (gw-(float64(len(g.bars))*(barW+barGap)-barGap))/2
		for _, b := range g.bars {
			m := b.value.Mean
			lo, hi := b.value.Interval()
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="%s"><title>%s %s %s: %.3f (%.3f–%.3f)</title></rect>`+"\n",
				x, y(m), barW, y(0)-y(m), color[b.config], esc(b.config), esc(g.label), esc(g.sub), m, lo, hi)
			if hi > lo {
				cx := x + barW/2
				// A ratio is never negative: a wide interval stops at the axis
				// instead of running into the labels below it.
				lo = math.Max(lo, 0)
				fmt.Fprintf(&s, `<path d="M%.1f %.1fV%.1fM%.1f %.1fh10M%.1f %.1fh10" stroke="black" fill="none"/>`+"\n",
					cx, y(lo), y(hi), cx-5, y(lo), cx-5, y(hi))
			}
			fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%.2f</text>`+"\n", x+barW/2, y(hi)-4, m)
			x += barW + barGap
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text><text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n",
			gx+gw/2, top+plotH+18, esc(g.label), gx+gw/2, top+plotH+33, esc(g.sub))
		gx += gw + groupGap
	}
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, left+plotW, y(0), y(0))
	m := f.Machine
	foot := fmt.Sprintf("%s, %d CPUs, kernel %s; %d run(s) of %s", orDash(m.CPUModel), m.Cores, orDash(m.Kernel), f.Config.Runs, f.Config.Duration)
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" font-size="10" fill="#555">%s</text>`+"\n", left, height-12, esc(foot))
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
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
func batchSweep(f *File) []int {
	batches := make([]int, len(f.Results))
	sizes := map[int]bool{}
	for i, r := range f.Results {
		if !tcpWorkload(r.Workload) {
			return nil
		}
		m, err := agentMode(r.Mode)
		switch {
		case err != nil:
			return nil
		case m.o.Mode == agent.ModeVanilla:
		case m.o.Batch > 0:
			batches[i] = m.o.Batch
			sizes[m.o.Batch] = true
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
func ofoMetric(r Result) (stats.Summary, bool) {
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
func writeBatchSVG(w io.Writer, f *File, batches []int) error {
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
		name := fmt.Sprintf("%s %s %s", r.Layout, r.Workload, FormatSize(r.Size))
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
		xs = appendUnique(xs, batches[i])
	}
	sort.Ints(xs)

	const (
		left, right, top, plotH, bottom = 80.0, 24.0, 72.0, 280.0, 76.0
		stepX                           = 72.0
	)
	plotW := stepX * float64(len(xs)+1)
	sub := fmt.Sprintf("segments TCP's receiver queued out of order (TcpExt TCPOFOQueue) per %s window, mean ± 95 %% CI", f.Config.Duration)
	legendW := 0.0
	for _, sr := range order {
		legendW += 24 + 7*float64(len(sr.name)) + 16
	}
	for _, v := range vanillas {
		legendW += 30 + 7*float64(len(v.name)) + 16
	}
	width := math.Max(640, math.Max(left+plotW, left+math.Max(legendW, 6.5*float64(len(sub))))+right)
	height := top + plotH + bottom
	ymax := 1.0
	for _, v := range vanillas {
		_, hi := v.ofo.Interval()
		ymax = math.Max(ymax, hi*1.1)
	}
	for _, sr := range order {
		for _, p := range sr.points {
			_, hi := p.Interval()
			ymax = math.Max(ymax, hi*1.1)
		}
	}
	step := niceStep(ymax / 5)
	ymax = math.Ceil(ymax/step) * step
	y := func(v float64) float64 { return top + plotH - v/ymax*plotH }
	xAt := func(i int) float64 { return left + stepX*float64(i+1) }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%.0f" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", left, esc("Out-of-order segments per batch size (MFLOW Fig. 7)"))
	fmt.Fprintf(&s, `<text x="%.0f" y="34" fill="#555">%s</text>`+"\n", left, esc(sub))
	lx := left
	for i, sr := range order {
		fmt.Fprintf(&s, `<rect x="%.1f" y="44" width="14" height="14" fill="%s"/><text x="%.1f" y="56">%s</text>`+"\n", lx, palette[i%len(palette)], lx+18, esc(sr.name))
		lx += 24 + 7*float64(len(sr.name)) + 16
	}
	for _, v := range vanillas {
		fmt.Fprintf(&s, `<line x1="%.1f" x2="%.1f" y1="51" y2="51" stroke="#444" stroke-dasharray="5,4"/><text x="%.1f" y="56">%s</text>`+"\n", lx, lx+20, lx+24, esc(v.name))
		lx += 30 + 7*float64(len(v.name)) + 16
	}
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, left+plotW, y(v), y(v), left-6, y(v)+4, trimFloat(v))
	}
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, left, top, top+plotH)
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, left+plotW, y(0), y(0))
	for i, b := range xs {
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", xAt(i), top+plotH+18, b)
	}
	fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", left+plotW/2, top+plotH+36,
		esc("batch size (packets per micro-flow)"))
	for _, v := range vanillas {
		fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="5,4"><title>%s: %.0f</title></line>`+"\n",
			left, left+plotW, y(v.ofo.Mean), y(v.ofo.Mean), esc(v.name), v.ofo.Mean)
	}
	for n, sr := range order {
		color := palette[n%len(palette)]
		var path []string
		for i, b := range xs {
			p, ok := sr.points[b]
			if !ok {
				continue
			}
			cmd := "L"
			if len(path) == 0 {
				cmd = "M"
			}
			path = append(path, fmt.Sprintf("%s%.1f %.1f", cmd, xAt(i), y(p.Mean)))
		}
		if len(path) > 0 {
			fmt.Fprintf(&s, `<path d="%s" stroke="%s" fill="none" stroke-width="2"/>`+"\n", strings.Join(path, ""), color)
		}
		for i, b := range xs {
			p, ok := sr.points[b]
			if !ok {
				continue
			}
			cx := xAt(i)
			if lo, hi := p.Interval(); hi > lo {
				fmt.Fprintf(&s, `<path d="M%.1f %.1fV%.1fM%.1f %.1fh10M%.1f %.1fh10" stroke="black" fill="none"/>`+"\n",
					cx, y(math.Max(lo, 0)), y(hi), cx-5, y(math.Max(lo, 0)), cx-5, y(hi))
			}
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s batch %d: %.0f out of order, %.3g Gbit/s</title></circle>`+"\n",
				cx, y(p.Mean), color, esc(sr.name), b, p.Mean, sr.gbps[b])
			fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%.0f</text>`+"\n", cx, y(p.Mean)-8, p.Mean)
		}
	}
	m := f.Machine
	foot := fmt.Sprintf("%s, %d CPUs, kernel %s; %d run(s) of %s", orDash(m.CPUModel), m.Cores, orDash(m.Kernel), f.Config.Runs, f.Config.Duration)
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" font-size="10" fill="#555">%s</text>`+"\n", left, height-12, esc(foot))
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

// withoutBatch is a mode spec without its batch setting, what the points
// of one line of writeBatchSVG share: "mflow:batch=16,elephant=0@b" is
// "mflow:elephant=0@b".
func withoutBatch(spec string) string {
	base, label, labelled := strings.Cut(spec, "@")
	name, settings, _ := strings.Cut(base, ":")
	var keep []string
	for _, kv := range strings.Split(settings, ",") {
		if kv != "" && !strings.HasPrefix(kv, "batch=") {
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
