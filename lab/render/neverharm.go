package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// writeRunByRun is the never-harm check's table (interleaved files): a
// mean hides the run that harmed. Each run divided by the baseline's run
// of its round, which ran beside it on the same testbed: their median,
// the worst of them (the lowest throughput ratio, the highest latency
// one) and its round, and how much of each window falcon was on the path.
func writeRunByRun(b *strings.Builder, f *schema.File) {
	if !f.Config.Interleave {
		return
	}
	var rows []string
	for i := range f.Results {
		r := &f.Results[i]
		base := schema.BaselineOf(f.Results, r)
		if base == nil || base == r {
			continue
		}
		k := workload.JudgedBy(r.Workload)
		rs := schema.RoundRatios(r, base)[k]
		if len(rs) == 0 {
			continue
		}
		lower := strings.HasPrefix(k, "lat_") || k == "cpu_total_busy"
		worst := rs[0]
		var xs []float64
		for _, x := range rs {
			xs = append(xs, x.Ratio)
			if (lower && x.Ratio > worst.Ratio) || (!lower && x.Ratio < worst.Ratio) {
				worst = x
			}
		}
		on := "—"
		if x, ok := r.Summary["falcon_on_path_pct"]; ok {
			on = fmt.Sprintf("%.0f (max %.0f)", x.Mean, x.Max)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d | %s%s | %.2f | %.2f (round %d) | %s |\n", r.Layout, r.Mode, r.Workload,
			workload.FormatSize(r.Size), r.Flows, r.Baseline, headlineNote[k], median(xs), worst.Ratio, worst.Round, on))
	}
	writeSection(b, rows, "Run by run (each run divided by the baseline's run of its round; for latency the ratio of p99, above 1 slower; "+
		"worst: the run furthest on the harmful side; on the path: % of each window, mean and the largest):",
		"| layout | mode | workload | size | flows | against | median ratio | worst run | on the path % |\n|---|---|---|---:|---:|---|---:|---:|---:|")
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
