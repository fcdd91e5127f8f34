package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

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
// flows, one colour per layout/mode.
func WriteSVG(w io.Writer, f *File) error {
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
