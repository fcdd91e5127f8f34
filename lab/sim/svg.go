package sim

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/falconnet/falcon/lab/papers"
	"github.com/falconnet/falcon/lab/schema"
)

// WriteSVG draws a prediction: per flow count, delivered rate against
// cores at the highest offered load, and p99 latency against offered load
// on the most cores. Every chart says it is simulated.
func WriteSVG(w io.Writer, p Prediction) error {
	if len(p.Points) == 0 {
		return fmt.Errorf("nothing to draw: the prediction has no points")
	}
	d := dimsOf(p)
	top, most := d.loads[len(d.loads)-1], d.cores[len(d.cores)-1]
	const cw, ch = 420.0, 260.0
	width, height := cw*float64(len(d.flows))+40, 3*ch+160
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="20" y="22" font-size="14" font-weight="bold" fill="#b00">%s</text>`+"\n", html.EscapeString(SimulatedLabel))
	fmt.Fprintf(&b, `<text x="20" y="40" fill="#444">UDP %d B; calibration: %s</text>`+"\n", p.Size, html.EscapeString(p.Calibration))
	// the placement in two lines: it is long
	pl := p.Placement
	if i := strings.Index(pl, "; CPU 0"); i > 0 {
		fmt.Fprintf(&b, `<text x="20" y="56" fill="#444">%s</text>`+"\n", html.EscapeString(pl[:i+1]))
		pl = pl[i+2:]
	}
	fmt.Fprintf(&b, `<text x="20" y="70" fill="#444">%s</text>`+"\n", html.EscapeString(pl))
	for i, f := range d.flows {
		thr, lat := flowSeries(p, d.modes, f, top, most)
		x := 20 + cw*float64(i)
		chart(&b, x, 85, cw-20, ch-20, fmt.Sprintf("%d flow(s): delivered at %.1fx one core's load", f, top),
			"cores", "Mdatagrams/s", thr, true)
		chart(&b, x, 85+ch+20, cw-20, ch-20, fmt.Sprintf("%d flow(s), %d cores: p99 one way", f, most),
			"offered Mdatagrams/s", "p99 µs", lat, false)
		chart(&b, x, 85+2*(ch+20), cw-20, ch-20, fmt.Sprintf("%d flow(s): ratio to vanilla (dashed: paper)", f),
			"cores", "× vanilla", ratioSeries(thr, d.modes), true, paperRefs(f)...)
	}
	for mi, m := range d.modes {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			20+float64(mi)*140, height-30, palette[mi%len(palette)], 34+float64(mi)*140, height-21, html.EscapeString(m))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// predictionDims are the values a prediction's points take: flows, cores
// and loads sorted, modes in the order met.
type predictionDims struct {
	flows, cores []int
	modes        []string
	loads        []float64
}

func dimsOf(p Prediction) predictionDims {
	var d predictionDims
	for _, pt := range p.Points {
		if !slices.Contains(d.flows, pt.Flows) {
			d.flows = append(d.flows, pt.Flows)
		}
		if !slices.Contains(d.cores, pt.Cores) {
			d.cores = append(d.cores, pt.Cores)
		}
		if !slices.Contains(d.modes, pt.Mode) {
			d.modes = append(d.modes, pt.Mode)
		}
		if !slices.Contains(d.loads, pt.Load) {
			d.loads = append(d.loads, pt.Load)
		}
	}
	slices.Sort(d.flows)
	slices.Sort(d.cores)
	slices.Sort(d.loads)
	return d
}

// flowSeries are, for f flows, each mode's delivered rate over cores at
// the top load, and its p99 over the offered rate on the most cores.
func flowSeries(p Prediction, modes []string, f int, top float64, most int) (thr, lat []series) {
	for mi, m := range modes {
		s1 := series{name: m, color: palette[mi%len(palette)]}
		s2 := s1
		for _, pt := range p.Points {
			if pt.Mode != m || pt.Flows != f {
				continue
			}
			if pt.Load == top {
				s1.pts = append(s1.pts, [2]float64{float64(pt.Cores), pt.PPS / 1e6})
			}
			if pt.Cores == most && pt.PPS > 0 {
				s2.pts = append(s2.pts, [2]float64{pt.OfferedPPS / 1e6, pt.P99Us})
			}
		}
		thr, lat = append(thr, s1), append(lat, s2)
	}
	return thr, lat
}

// ratioSeries divides each mode's delivered rate by vanilla's at the same
// cores (when vanilla is the first mode).
func ratioSeries(thr []series, modes []string) []series {
	var ratio []series
	for si, s1 := range thr {
		if modes[si] == schema.Vanilla {
			continue
		}
		r := series{name: s1.name, color: s1.color}
		for _, pt := range s1.pts {
			for _, v := range thr[0].pts {
				if modes[0] == schema.Vanilla && v[0] == pt[0] && v[1] > 0 {
					r.pts = append(r.pts, [2]float64{pt[0], pt[1] / v[1]})
				}
			}
		}
		ratio = append(ratio, r)
	}
	return ratio
}

var palette = []string{"#444444", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"}

type series struct {
	name, color string
	pts         [][2]float64
}

// chart draws one line chart; logX spaces x by log2 (core counts).
// reference is a value a paper reported, drawn as a dashed line.
type reference struct {
	value float64
	label string
}

// paperRefs is what FALCON reported for the rate of UDP flows over the
// vanilla overlay with packet steering (Fig. 13, 16 B, dedicated Falcon
// cores): one flow neither better nor worse, several up to 63 % more.
func paperRefs(flows int) []reference {
	c := papers.Case{Layout: "docker", Mode: "falcon", Workload: "multi-flow", Size: 16, Flows: flows, Baseline: "docker/vanilla", Metric: "pps"}
	for _, cl := range papers.Comparable(c) {
		if cl.Figure.Paper != "FALCON" || cl.Figure.Figure != "Fig. 13" {
			continue
		}
		v := cl.Value.Value
		if flows == 1 {
			return []reference{{v, "FALCON Fig. 13: 1 flow, no change"}}
		}
		return []reference{{v, fmt.Sprintf("FALCON Fig. 13: up to %+.0f %% (multi-flow UDP)", (v-1)*100)}}
	}
	return nil
}

func chart(b *strings.Builder, x0, y0, w, h float64, title, xl, yl string, ss []series, logX bool, refs ...reference) {
	const ml, mb, mt = 50.0, 30.0, 34.0
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	fx := func(v float64) float64 {
		if logX {
			return math.Log2(v)
		}
		return v
	}
	for _, s := range ss {
		for _, p := range s.pts {
			xmin, xmax, ymax = min(xmin, fx(p[0])), max(xmax, fx(p[0])), max(ymax, p[1])
		}
	}
	if math.IsInf(xmin, 1) {
		return
	}
	for _, r := range refs {
		ymax = max(ymax, r.value)
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax *= 1.1
	px := func(v float64) float64 { return x0 + ml + (fx(v)-xmin)/(xmax-xmin)*(w-ml) }
	py := func(v float64) float64 { return y0 + mt + (1-v/ymax)*(h-mt-mb) }
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", x0+ml, y0+12, html.EscapeString(title))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", x0+ml, py(0), x0+w, py(0))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", x0+ml, py(0), x0+ml, y0+mt)
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0+ml-4, py(v)+4, short(v))
	}
	seen := map[float64]bool{}
	for _, s := range ss {
		for _, p := range s.pts {
			if !seen[p[0]] {
				seen[p[0]] = true
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(p[0]), py(0)+14, short(p[0]))
			}
		}
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x0+ml+(w-ml)/2, py(0)+27, html.EscapeString(xl))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#444">%s</text>`+"\n", x0, y0+mt-4, html.EscapeString(yl))
	for _, r := range refs {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#b00" stroke-dasharray="5,4"/>`+"\n", x0+ml, py(r.value), x0+w, py(r.value))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#b00" text-anchor="end">%s</text>`+"\n", x0+w, py(r.value)-4, html.EscapeString(r.label))
	}
	for _, s := range ss {
		slices.SortFunc(s.pts, func(a, c [2]float64) int { return int(math.Copysign(1, a[0]-c[0])) })
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`+"\n",
			s.color, strings.Join(pts, " "), html.EscapeString(s.name))
	}
}

func short(v float64) string {
	switch {
	case v == math.Trunc(v) && v >= 1:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
