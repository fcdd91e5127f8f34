package render

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/report"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// The report as one self-contained HTML page (falcon-lab report --html): a
// section per results file (or falcon-lab sim prediction, lab/sim) with
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

// FileSection is the section of the results file read from source;
// presetSummary, when the file ran a preset, is its one line (bench.PresetSummary).
func FileSection(source string, f *schema.File, presetSummary string) (report.HTMLSection, error) {
	var body strings.Builder
	if err := WriteTable(&body, f); err != nil {
		return report.HTMLSection{}, err
	}
	s := report.HTMLSection{Title: filepath.Base(source), Source: source, Facts: fileFacts(f), Body: body.String()}
	if p := f.Config.Preset; p != "" {
		s.Title = "preset " + p + ": " + s.Title
		s.Subtitle = presetSummary
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
	if c.Sender == schema.SenderKernel {
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
		if pc.metric != workload.JudgedBy(r.Workload) || pc.Value.Unit != "×" {
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
