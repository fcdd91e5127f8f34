package render

import (
	"fmt"
	"math"
	"strings"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
)

// The pieces every chart of a results file is drawn with, by svg.go's
// standalone charts and html.go's page alike: a bar chart of groups
// (barChart), a line chart over categories (lineChart) and stacked bars
// (stackChart), each written as one self-contained <svg>, with its 95 %
// intervals as whiskers and, where a paper reported a comparable ratio,
// that value marked in red beside ours (paperMark).

// paperRed marks what a paper reported.
const paperRed = "#b00"

// paperMark is a ratio a paper reported for the same test as a bar or
// point: lo, or the range lo–hi.
type paperMark struct {
	lo, hi float64
	label  string // "FALCON Fig. 2 (a) (100 Gb/s, 64 KB, TCP): 0.53 × host"
}

type bar struct {
	config string // layout/mode
	value  stats.Summary
	marks  []paperMark
}

type barGroup struct {
	label, sub string // workload; size, flows
	bars       []bar
}

// width is the room a group takes: its bars, or its label if wider.
func (g *barGroup) width(barW, barGap float64) float64 {
	return groupWidth(len(g.bars), barW, barGap, g.label, g.sub)
}

// groupWidth is the room n bars take under a label and a sub-label.
func groupWidth(n int, barW, barGap float64, label, sub string) float64 {
	bars := float64(n)*(barW+barGap) - barGap
	text := 7 * float64(max(len(label), len(sub)))
	return math.Max(bars, text)
}

// svgOpen starts a chart of the given size on a white ground.
func svgOpen(s *strings.Builder, width, height float64) {
	fmt.Fprintf(s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
}

// svgHeading writes a chart's title and the line under it.
func svgHeading(s *strings.Builder, left float64, title, sub string) {
	fmt.Fprintf(s, `<text x="%.0f" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", left, esc(title))
	fmt.Fprintf(s, `<text x="%.0f" y="34" fill="#555">%s</text>`+"\n", left, esc(sub))
}

// svgClose writes the footnote (the machine and method) and ends the chart.
func svgClose(s *strings.Builder, left, height float64, foot string) {
	if foot != "" {
		fmt.Fprintf(s, `<text x="%.0f" y="%.0f" font-size="10" fill="#555">%s</text>`+"\n", left, height-12, esc(foot))
	}
	s.WriteString("</svg>\n")
}

// footLine is a chart's footnote: where and how it was measured.
func footLine(f *schema.File) string {
	m := f.Machine
	return fmt.Sprintf("%s, %d CPUs, kernel %s; %d run(s) of %s", orDash(m.CPUModel), m.Cores, orDash(m.Kernel), f.Config.Runs, f.Config.Duration)
}

// legendEntry is a filled square, or with dashed a dashed line, of a colour.
type legendEntry struct {
	name, color string
	dashed      bool
	mark        bool // a paper's value: a red diamond
}

func (e legendEntry) width() float64 {
	if e.dashed {
		return 30 + 7*float64(len(e.name)) + 16
	}
	return 24 + 7*float64(len(e.name)) + 16
}

func legendWidth(es []legendEntry) float64 {
	w := 0.0
	for _, e := range es {
		w += e.width()
	}
	return w
}

// svgLegend writes the entries in a row at y 44.
func svgLegend(s *strings.Builder, left float64, es []legendEntry) {
	lx := left
	for _, e := range es {
		switch {
		case e.mark:
			fmt.Fprintf(s, `<path d="M%.1f 45l6 6l-6 6l-6 -6z" fill="white" stroke="%s" stroke-width="2"/><text x="%.1f" y="56">%s</text>`+"\n", lx+7, paperRed, lx+18, esc(e.name))
		case e.dashed:
			fmt.Fprintf(s, `<line x1="%.1f" x2="%.1f" y1="51" y2="51" stroke="%s" stroke-dasharray="5,4"/><text x="%.1f" y="56">%s</text>`+"\n", lx, lx+20, e.color, lx+24, esc(e.name))
		default:
			fmt.Fprintf(s, `<rect x="%.1f" y="44" width="14" height="14" fill="%s"/><text x="%.1f" y="56">%s</text>`+"\n", lx, e.color, lx+18, esc(e.name))
		}
		lx += e.width()
	}
}

// yScale maps values onto a plot top..top+plotH from 0 to a round ymax.
type yScale struct {
	top, plotH, ymax, step float64
	tick                   func(float64) string // tick labels; trimFloat when nil
}

// newYScale rounds hi (the largest value to show) up to a tick step of
// 1, 2 or 5 × 10^k.
func newYScale(top, plotH, hi float64) yScale {
	step := niceStep(hi / 5)
	return yScale{top: top, plotH: plotH, ymax: math.Ceil(hi/step) * step, step: step}
}

func (a yScale) y(v float64) float64 { return a.top + a.plotH - v/a.ymax*a.plotH }

// grid writes the horizontal grid lines and their labels.
func (a yScale) grid(s *strings.Builder, left, plotW float64) {
	tick := a.tick
	if tick == nil {
		tick = trimFloat
	}
	for v := 0.0; v <= a.ymax+a.step/2; v += a.step {
		fmt.Fprintf(s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, left+plotW, a.y(v), a.y(v), left-6, a.y(v)+4, tick(v))
	}
}

// whisker draws a 95 % interval at x from y lo to y hi.
func whisker(s *strings.Builder, cx, ylo, yhi float64) {
	fmt.Fprintf(s, `<path d="M%.1f %.1fV%.1fM%.1f %.1fh10M%.1f %.1fh10" stroke="black" fill="none"/>`+"\n",
		cx, ylo, yhi, cx-5, ylo, cx-5, yhi)
}

// drawMarks draws what papers reported at x: a red diamond at the value,
// filled with the colour of the bar or line it stands beside, a red bar
// over a range, the claim as its tooltip.
func drawMarks(s *strings.Builder, a yScale, cx float64, fill string, marks []paperMark) {
	for _, m := range marks {
		if m.hi > m.lo {
			fmt.Fprintf(s, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", cx, cx, a.y(m.lo), a.y(m.hi), paperRed)
		}
		fmt.Fprintf(s, `<path d="M%.1f %.1fl6 6l-6 6l-6 -6z" fill="%s" stroke="%s" stroke-width="2"><title>%s</title></path>`+"\n",
			cx, a.y(m.lo)-6, fill, paperRed, esc(m.label))
	}
}

func marksHigh(marks []paperMark, ymax float64) float64 {
	for _, m := range marks {
		ymax = math.Max(ymax, math.Max(m.lo, m.hi)*1.1)
	}
	return ymax
}

// barChart is bars with 95 % whiskers in labelled groups, a colour per
// config (the legend's order).
type barChart struct {
	title, how string
	groups     []*barGroup
	configs    []string
	floor      float64 // the axis reaches at least this
	one        bool    // the values are ratios: a dashed line at 1, intervals stop at 0
	valueFmt   func(float64) string
	tick       func(float64) string
	foot       string
	minWidth   float64 // 640 when 0 (a standalone chart's)
}

func (c barChart) svg() string {
	color := map[string]string{}
	for i, cfg := range c.configs {
		color[cfg] = palette[i%len(palette)]
	}
	valueFmt := c.valueFmt
	if valueFmt == nil {
		valueFmt = func(v float64) string { return fmt.Sprintf("%.2f", v) }
	}
	const (
		barW, barGap, groupGap = 30.0, 4.0, 36.0
		left, right, top       = 64.0, 24.0, 72.0
		plotH, bottom          = 280.0, 76.0
	)
	ymax, marked := c.floor, false
	for _, g := range c.groups {
		for _, b := range g.bars {
			_, hi := b.value.Interval()
			ymax = math.Max(ymax, hi*1.1)
			ymax = marksHigh(b.marks, ymax)
			marked = marked || len(b.marks) > 0
		}
	}
	a := newYScale(top, plotH, ymax)
	a.tick = c.tick
	plotW := groupGap
	for _, g := range c.groups {
		plotW += g.width(barW, barGap) + groupGap
	}
	var legend []legendEntry
	for _, cfg := range c.configs {
		legend = append(legend, legendEntry{name: cfg, color: color[cfg]})
	}
	if marked {
		legend = append(legend, legendEntry{name: "a paper's ratio (filled in the case's colour)", mark: true})
	}
	width := math.Max(orDefault(c.minWidth, 640), math.Max(left+plotW+right, left+legendWidth(legend)+right))
	height := top + plotH + bottom
	y := a.y

	var s strings.Builder
	svgOpen(&s, width, height)
	svgHeading(&s, left, c.title, c.how)
	svgLegend(&s, left, legend)
	a.grid(&s, left, plotW)
	if c.one {
		fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="5,4"/>`+"\n", left, left+plotW, y(1), y(1))
	}
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, left, top, top+plotH)
	// Bars, centred in their group's room.
	gx := left + groupGap
	for _, g := range c.groups {
		gw := g.width(barW, barGap)
		x := gx + (gw-(float64(len(g.bars))*(barW+barGap)-barGap))/2
		for _, b := range g.bars {
			m := b.value.Mean
			lo, hi := b.value.Interval()
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="%s"><title>%s %s %s: %.3f (%.3f–%.3f)</title></rect>`+"\n",
				x, y(m), barW, y(0)-y(m), color[b.config], esc(b.config), esc(g.label), esc(g.sub), m, lo, hi)
			if hi > lo {
				// A ratio is never negative: a wide interval stops at the axis
				// instead of running into the labels below it.
				whisker(&s, x+barW/2, y(math.Max(lo, 0)), y(hi))
			}
			fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", x+barW/2, y(hi)-4, valueFmt(m))
			drawMarks(&s, a, x+barW, color[b.config], b.marks)
			x += barW + barGap
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text><text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n",
			gx+gw/2, top+plotH+18, esc(g.label), gx+gw/2, top+plotH+33, esc(g.sub))
		gx += gw + groupGap
	}
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, left+plotW, y(0), y(0))
	svgClose(&s, left, height, c.foot)
	return s.String()
}

// lineSeries is one line of a lineChart: a value (mean and 95 %
// interval) at some of the chart's x positions.
type lineSeries struct {
	name, color string
	dashed      bool
	points      map[int]stats.Summary // x index → value
	tips        map[int]string        // x index → the point's tooltip
	marks       map[int][]paperMark
}

// hLine is a dashed grey line across the plot at a value, in the legend;
// the axis reaches hi (its interval's top) too.
type hLine struct {
	name, tip string
	value, hi float64
}

// lineChart draws series over categories xs, evenly spaced left to right
// (the papers' sizes, flow counts and batch sizes are powers of two); the
// values are written beside the points of up to two series.
type lineChart struct {
	title, sub, xLabel string
	xs                 []string
	series             []*lineSeries
	hlines             []hLine
	floor              float64
	valueFmt, tick     func(float64) string
	foot               string
	minWidth           float64 // 640 when 0 (a standalone chart's)
}

func (c lineChart) svg() string {
	const (
		left, right, top, plotH, bottom = 80.0, 24.0, 72.0, 280.0, 76.0
		stepX                           = 72.0
	)
	plotW := stepX * float64(len(c.xs)+1)
	legend, ymax := c.legend()
	width := math.Max(orDefault(c.minWidth, 640), math.Max(left+plotW, left+math.Max(legendWidth(legend), 6.5*float64(len(c.sub))))+right)
	height := top + plotH + bottom
	a := newYScale(top, plotH, ymax)
	a.tick = c.tick
	y := a.y
	xAt := func(i int) float64 { return left + stepX*float64(i+1) }

	var s strings.Builder
	svgOpen(&s, width, height)
	svgHeading(&s, left, c.title, c.sub)
	svgLegend(&s, left, legend)
	a.grid(&s, left, plotW)
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, left, top, top+plotH)
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, left+plotW, y(0), y(0))
	for i, x := range c.xs {
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", xAt(i), top+plotH+18, esc(x))
	}
	fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", left+plotW/2, top+plotH+36, esc(c.xLabel))
	for _, h := range c.hlines {
		fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="5,4"><title>%s</title></line>`+"\n",
			left, left+plotW, y(h.value), y(h.value), esc(h.tip))
	}
	for _, sr := range c.series {
		c.drawSeries(&s, sr, a, xAt)
	}
	svgClose(&s, left, height, c.foot)
	return s.String()
}

// legend lists the chart's lines (giving each without a colour one of the
// palette's); ymax is the top its values, intervals and marks need.
func (c lineChart) legend() (legend []legendEntry, ymax float64) {
	marked := false
	ymax = c.floor
	for i, sr := range c.series {
		if sr.color == "" {
			sr.color = palette[i%len(palette)]
		}
		legend = append(legend, legendEntry{name: sr.name, color: sr.color})
		for x, p := range sr.points {
			_, hi := p.Interval()
			ymax = math.Max(ymax, hi*1.1)
			ymax = marksHigh(sr.marks[x], ymax)
			marked = marked || len(sr.marks[x]) > 0
		}
	}
	for _, h := range c.hlines {
		legend = append(legend, legendEntry{name: h.name, color: "#444", dashed: true})
		ymax = math.Max(ymax, math.Max(h.value, h.hi)*1.1)
	}
	if marked {
		legend = append(legend, legendEntry{name: "a paper's ratio (filled in the case's colour)", mark: true})
	}
	return legend, ymax
}

// drawSeries draws one line, and each of its points with its interval, its
// tooltip, its value and the papers' marks beside it.
func (c lineChart) drawSeries(s *strings.Builder, sr *lineSeries, a yScale, xAt func(int) float64) {
	y := a.y
	valueFmt := c.valueFmt
	if valueFmt == nil {
		valueFmt = func(v float64) string { return fmt.Sprintf("%.0f", v) }
	}
	// Two lines' values can be written beside their points; more would
	// cover each other (each point's tooltip has its value).
	labels := len(c.series) <= 2
	var path []string
	for i := range c.xs {
		if p, ok := sr.points[i]; ok {
			cmd := "L"
			if len(path) == 0 {
				cmd = "M"
			}
			path = append(path, fmt.Sprintf("%s%.1f %.1f", cmd, xAt(i), y(p.Mean)))
		}
	}
	dash := ""
	if sr.dashed {
		dash = ` stroke-dasharray="6,3"`
	}
	if len(path) > 0 {
		fmt.Fprintf(s, `<path d="%s" stroke="%s" fill="none" stroke-width="2"%s/>`+"\n", strings.Join(path, ""), sr.color, dash)
	}
	for i := range c.xs {
		p, ok := sr.points[i]
		if !ok {
			continue
		}
		cx := xAt(i)
		if lo, hi := p.Interval(); hi > lo {
			whisker(s, cx, y(math.Max(lo, 0)), y(hi))
		}
		tip := sr.tips[i]
		if tip == "" {
			tip = fmt.Sprintf("%s at %s: %s", sr.name, c.xs[i], pm(p, 3, ""))
		}
		fmt.Fprintf(s, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>`+"\n", cx, y(p.Mean), sr.color, esc(tip))
		if labels {
			fmt.Fprintf(s, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", cx, y(p.Mean)-8, valueFmt(p.Mean))
		}
		drawMarks(s, a, cx+8, sr.color, sr.marks[i])
	}
}

func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// siShort writes a tick or value with an SI prefix: 250k, 1.2M.
func siShort(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trimFloat(v/1e9) + "G"
	case a >= 1e6:
		return trimFloat(v/1e6) + "M"
	case a >= 1e3:
		return trimFloat(v/1e3) + "k"
	}
	return trimFloat(v)
}
