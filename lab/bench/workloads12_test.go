package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
)

// The new workloads' first real runs (docker, vanilla and falcon, one run
// each, on the 2-vCPU development machine; results/workloads-2cpu-vm/workloads-2cpu-vm.md):
// each file reads back, its summaries are its runs', and the table shows
// its section.
func TestRecordedWorkloads(t *testing.T) {
	for _, c := range []struct {
		file, workload, section string
		check                   func(schema.Run) bool
	}{
		{"overload-2cpu-vm.json", "overload-latency", "Latency when overloaded", func(r schema.Run) bool {
			return r.Overload != nil && len(r.Overload.Steps) > 0 && r.Overload.Steps[0].Mode == "throughput" &&
				r.Overload.RatePPS > 0 && r.Latency != nil && r.Latency.P99Us > 0
		}},
		{"overload-tcp-2cpu-vm.json", "overload-latency-tcp", "Latency when overloaded", func(r schema.Run) bool {
			return r.Overload != nil && r.Overload.RatePPS > 0 && r.Reordering != nil
		}},
		{"rates-2cpu-vm.json", "rates", "Fixed rates", func(r schema.Run) bool { return len(r.BusyPct) == len(r.CPU) && r.PPS > 0 }},
		{"rates-tcp-2cpu-vm.json", "rates-tcp", "Fixed rates", func(r schema.Run) bool { return len(r.BusyPct) == len(r.CPU) && r.Gbps > 0 }},
		{"hotspot-2cpu-vm.json", "hotspot", "Hotspot (FALCON Fig. 16)", func(r schema.Run) bool {
			h := r.Hotspot
			return h != nil && len(h.Flows) == 4 && len(h.Flows[0].Points) > 30 && h.HeavyAtS > h.WindowStartS &&
				h.HeavyAtS < h.WindowEndS && h.Flows[0].AfterPPS > 2*h.Flows[0].BeforePPS
		}},
	} {
		f, err := schema.ReadFile("../../results/workloads-2cpu-vm/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := render.WriteTable(&b, f); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.section) {
			t.Errorf("%s: no %q section in the table:\n%s", c.file, c.section, b.String())
		}
		// The chart tells the rates apart.
		var svg bytes.Buffer
		if err := render.WriteSVG(&svg, f); err != nil {
			t.Fatal(err)
		}
		if c.workload == "rates" && (!strings.Contains(svg.String(), "16 B at 50Kpps (total CPU)") || !strings.Contains(b.String(), "| rates at 200Kpps |")) {
			t.Errorf("%s: the rates are not told apart:\n%s", c.file, b.String())
		}
		for _, r := range f.Results {
			if r.Workload != c.workload || len(r.Runs) != 1 || len(r.Errors) > 0 {
				t.Errorf("%s: %s/%s %s: %d runs, errors %q", c.file, r.Layout, r.Mode, r.Workload, len(r.Runs), r.Errors)
				continue
			}
			if !c.check(r.Runs[0]) {
				t.Errorf("%s: %s/%s: the run lacks its workload's record", c.file, r.Layout, r.Mode)
			}
			stored := r.Summary
			r.Summarize()
			for k, s := range stored {
				if r.Summary[k] != s {
					t.Errorf("%s: %s/%s %s: stored %+v, recomputed %+v", c.file, r.Layout, r.Mode, k, s, r.Summary[k])
				}
			}
		}
	}
}
