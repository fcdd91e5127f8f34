package render

import (
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
)

// Where the host is the baseline, a mode is also shown against its own
// overlay's vanilla, paired by round; vanilla itself and unpaired modes
// are not.
func TestVsOverlay(t *testing.T) {
	runs := func(pps ...float64) []schema.Run {
		var rs []schema.Run
		for i, p := range pps {
			rs = append(rs, schema.Run{Round: i + 1, PPS: p, WindowS: 2})
		}
		return rs
	}
	res := []schema.Result{
		{Layout: "host", Mode: "vanilla", Workload: "udp-stress", Size: 16, Flows: 1, Testbed: "a", Runs: runs(200, 200)},
		{Layout: "docker", Mode: "vanilla", Workload: "udp-stress", Size: 16, Flows: 1, Testbed: "b", Runs: runs(100, 80)},
		{Layout: "docker", Mode: "auto", Workload: "udp-stress", Size: 16, Flows: 1, Testbed: "b", Runs: runs(150, 120)},
		{Layout: "docker", Mode: "fastpath", Workload: "udp-stress", Size: 16, Flows: 1, Testbed: "c", Runs: runs(150, 120)},
	}
	for i := range res {
		res[i].Summarize()
	}
	schema.Normalize(res, "auto")
	var b strings.Builder
	writeVsOverlay(&b, &schema.File{Results: res})
	got := b.String()
	if !strings.Contains(got, "| docker | auto | udp-stress | 16 B | 1 | 1.50 (1.50–1.50) | — | — |") {
		t.Errorf("auto against docker's vanilla is missing:\n%s", got)
	}
	if strings.Contains(got, "| vanilla |") || strings.Contains(got, "| fastpath |") {
		t.Errorf("vanilla, or a mode on another testbed, is shown:\n%s", got)
	}
}
