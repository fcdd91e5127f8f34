package render

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// writeVsOverlay: where the table's baseline is the host network, what
// each mode does against its own overlay's vanilla, paired by round (the
// comparison a user deciding on falcon makes, which the demo is for).
func writeVsOverlay(b *strings.Builder, f *schema.File) {
	type key struct {
		layout, workload string
		size, flows      int
	}
	vanilla := map[key]*schema.Result{}
	for i, r := range f.Results {
		if r.Mode == "vanilla" {
			vanilla[key{r.Layout, r.Workload, r.Size, r.Flows}] = &f.Results[i]
		}
	}
	var rows []string
	for i, r := range f.Results {
		v := vanilla[key{r.Layout, r.Workload, r.Size, r.Flows}]
		if r.Mode == "vanilla" || r.Baseline == r.Layout+"/vanilla" || v == nil || v.Testbed != r.Testbed {
			continue
		}
		n := schema.PairedRatios(&f.Results[i], v)
		if n == nil {
			continue
		}
		rate := "pps"
		if workload.JudgedBy(r.Workload) == "gbps" {
			rate = "gbps"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d | %s | %s | %s |\n", r.Layout, r.Mode, workloadLabel(r),
			workload.FormatSize(r.Size), r.Flows, pm(n[rate], 2, headlineNote[rate]), pm(n["lat_p50_us"], 2, ""), pm(n["lat_p99_us"], 2, "")))
	}
	writeSection(b, rows, "Against the overlay's own vanilla, paired by round (each run over vanilla's run of its round: geometric mean, "+
		"95 % interval; rate: packets, operations, requests or round trips a second, Gbit/s for TCP streams, above 1 is more; "+
		"latency below 1 is faster):",
		"| layout | mode | workload | size | flows | rate × vanilla | p50 × vanilla | p99 × vanilla |\n|---|---|---|---:|---:|---:|---:|---:|")
}
