// Package papers holds what the four papers this project reproduces say
// about their figures, each value with the sentence it comes from, so a
// measured ratio can stand beside the published one. Only values the
// papers' text states are here: their plots did not survive the text
// extraction. The texts have no page numbers, so entries name sections.
package papers

import (
	_ "embed"
	"encoding/json"
	"math"
	"strings"
	"sync"
)

//go:embed figures.json
var data []byte

// Figure is what one paper's text says about one figure (or some of its
// panels) in one configuration.
type Figure struct {
	Paper   string  `json:"paper"`  // FALCON, MFLOW, "K8s RPS/RFS", "HotCloud'19"
	Figure  string  `json:"figure"` // "Fig. 13"
	Panels  string  `json:"panels,omitempty"`
	Section string  `json:"section"`
	Plotted string  `json:"plotted"` // the metric the figure plots
	Unit    string  `json:"unit"`
	Config  Config  `json:"config"`
	Values  []Value `json:"values"` // empty when the text gives no number
	Quote   string  `json:"quote"`  // verbatim, so a reader can find it
	Note    string  `json:"note,omitempty"`
}

// Config is the setup as the paper states it; Layout and Workload name
// falcon-lab bench's equivalents where there is one, SizeBytes is 0 when the
// value is not of one size, FlowsMax 0 when there is no upper bound.
type Config struct {
	Systems   []string `json:"systems"`
	Overlay   string   `json:"overlay,omitempty"`
	Layout    string   `json:"layout,omitempty"`
	Test      string   `json:"test,omitempty"`
	Protocol  string   `json:"protocol,omitempty"`
	Workload  string   `json:"workload,omitempty"`
	Size      string   `json:"size,omitempty"`
	SizeBytes int      `json:"size_bytes,omitempty"`
	Flows     string   `json:"flows,omitempty"`
	FlowsMin  int      `json:"flows_min,omitempty"`
	FlowsMax  int      `json:"flows_max,omitempty"`
	Kernel    string   `json:"kernel,omitempty"`
	NIC       string   `json:"nic,omitempty"`
}

// Value is one number: a ratio (Unit "×") to RelativeTo, or an absolute
// value. Metric uses bench's names (pps, gbps, lat_p99_us, …) where the
// paper's metric is one of them. Max ends a range ("2.3x – 7.5x").
type Value struct {
	System     string  `json:"system"`
	Metric     string  `json:"metric"`
	Value      float64 `json:"value"`
	Max        float64 `json:"max,omitempty"`
	Unit       string  `json:"unit"`
	RelativeTo string  `json:"relative_to,omitempty"`
	Bound      string  `json:"bound,omitempty"` // "up to", "about", "more than", …
	Where      string  `json:"where,omitempty"`
	Said       string  `json:"said"` // the words of the quote that give it
}

var all = sync.OnceValue(func() []Figure {
	var fs []Figure
	if err := json.Unmarshal(data, &fs); err != nil {
		panic("papers: figures.json: " + err.Error()) // the tests parse it first
	}
	return fs
})

// All returns every entry, in the file's order.
func All() []Figure { return append([]Figure(nil), all()...) }

// Lookup returns the entries of one figure ("FALCON", "Fig. 13").
func Lookup(paper, figure string) []Figure {
	var out []Figure
	for _, f := range all() {
		if f.Paper == paper && f.Figure == figure {
			out = append(out, f)
		}
	}
	return out
}

// Case is a bench result's case and one of its normalised metrics:
// Baseline is bench's "layout/mode" it was divided by.
type Case struct {
	Layout, Mode, Workload string
	Size, Flows            int
	Baseline, Metric       string
}

// Claim is a reported value comparable to a case's ratio.
type Claim struct {
	Figure Figure
	Value  Value
}

// Comparable returns the reported ratios of the same system against the
// same baseline, in the same test, size, flow count and metric as c.
func Comparable(c Case) []Claim {
	sys, base := system(c.Layout, c.Mode), baseline(c.Layout, c.Baseline)
	if sys == "" || base == "" {
		return nil
	}
	var out []Claim
	for _, f := range all() {
		k := f.Config
		if k.Layout != c.Layout || k.Workload != c.Workload || !sameSize(k.SizeBytes, c.Size) ||
			(k.FlowsMin > 0 && c.Flows < k.FlowsMin) || (k.FlowsMax > 0 && c.Flows > k.FlowsMax) {
			continue
		}
		for _, v := range f.Values {
			if v.System == sys && v.RelativeTo == base && sameMetric(v.Metric, c.Metric, k.Protocol) {
				out = append(out, Claim{f, v})
			}
		}
	}
	return out
}

// sameSize: a paper's "64 KB" is 65536 bytes, which UDP cannot carry, so
// bench's largest datagram has to pass for it.
func sameSize(paper, bench int) bool {
	return paper == 0 || math.Abs(float64(paper-bench)) <= 0.01*float64(paper)
}

// sameMetric: datagrams of one size make packets/s and Gbit/s the same
// ratio; a TCP segment's size depends on GRO, so TCP needs Gbit/s.
func sameMetric(paper, bench, protocol string) bool {
	rate := func(m string) bool { return m == "pps" || m == "gbps" }
	return paper == bench || (protocol == "UDP" && rate(paper) && rate(bench))
}

// system is the papers' name for what bench's mode runs on the layout.
func system(layout, mode string) string {
	name, _, _ := strings.Cut(mode, ":")
	switch name {
	case "vanilla":
		if layout == "host" {
			return "host"
		}
		return "vanilla overlay"
	case "falcon+split":
		if layout == "host" {
			return "Host+" // FALCON Fig. 13 c, d: GRO splitting on the host network
		}
		return "FALCON"
	case "falcon":
		if strings.Contains(mode, "policy=static") {
			return "FALCON static" // FALCON Fig. 16: the second choice disabled
		}
		return "FALCON"
	case "rps", "rps+", "rfs", "rfs+":
		return strings.ToUpper(name)
	}
	return ""
}

// baseline names bench's baseline as the papers do; an overlay's ratio to
// another layout's overlay is none the papers report.
func baseline(layout, b string) string {
	l, m, ok := strings.Cut(b, "/")
	if !ok {
		m = "vanilla"
	}
	if l != "host" && l != layout {
		return ""
	}
	return system(l, m)
}
