package render

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// writeFastPath says how much of each case's traffic the fast path
// carried: a mode that runs it and gains nothing may not have been on it
// (flows still learning, aggregates it leaves to the slow path).
func writeFastPath(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		carried, ok := r.Summary["fastpath_hit_pct"]
		if !ok {
			continue
		}
		sum := map[string]uint64{}
		for _, run := range r.Runs {
			for k, v := range run.FastPath {
				sum[k] += v
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d | %s | %d | %d | %s |\n", r.Layout, r.Mode, r.Workload,
			workload.FormatSize(r.Size), r.Flows, pm(carried, 1, ""), sum["ingress_hit"]+sum["egress_hit"],
			sum["ingress_miss"]+sum["egress_miss"], slowReasons(sum)))
	}
	writeSection(b, rows, "The fast path during the windows (% of the packets it looked at that it carried, a GRO aggregate counted once, "+
		"per window; hits, misses and the packets it left to the slow path by reason, all windows together, both hosts):",
		"| layout | mode | workload | size | flows | carried % | hits | misses | left to the slow path |\n|---|---|---|---:|---:|---:|---:|---:|---|")
}

// slowReasons lists the slow path's reasons that counted any packet.
func slowReasons(c map[string]uint64) string {
	if why := datapath.SlowCounted(c); len(why) > 0 {
		return strings.Join(why, ", ")
	}
	return "none"
}
