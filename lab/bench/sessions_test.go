package bench

import (
	"math"
	"testing"

	"github.com/falconnet/falcon/lab/measure"
	"github.com/falconnet/falcon/lab/schema"
)

func TestSessionsInterleaveAndRotate(t *testing.T) {
	cases := func(mode string) []measure.Case {
		return []measure.Case{{Layout: "docker", Mode: mode, Workload: "udp", Size: 1000, Flows: 1}, {Layout: "docker", Mode: mode, Workload: "tcp", Size: 128 << 10, Flows: 1}}
	}
	plan := []TestbedPlan{
		{Layout: "docker", Mode: "vanilla", Containers: 1, Cases: cases("vanilla")},
		{Layout: "docker", Mode: "falcon", Containers: 1, Cases: cases("falcon")},
		{Layout: "host", Mode: "vanilla", Containers: 1},
	}
	if g := groupPlans(plan, false); len(g) != 3 {
		t.Fatalf("grouped: %d testbeds, want one per plan", len(g))
	}
	g := groupPlans(plan, true)
	if len(g) != 2 || len(g[0]) != 2 || g[1][0].Layout != "host" {
		t.Fatalf("interleaved: %v, want docker's two modes together and host alone", g)
	}
	got := sessions(g[0], 3, true)
	// Rounds of one session per mode, the first mode rotating.
	wantPlans := []int{0, 1, 1, 0, 0, 1}
	if len(got) != len(wantPlans) {
		t.Fatalf("%d sessions, want %d", len(got), len(wantPlans))
	}
	for i, s := range got {
		if s.plan != wantPlans[i] {
			t.Errorf("session %d: plan %d, want %d", i, s.plan, wantPlans[i])
		}
		if len(s.items) != 2 || s.items[0] != (item{0, i/2 + 1}) || s.items[1] != (item{1, i/2 + 1}) {
			t.Errorf("session %d: %v, want both cases' run %d", i, s.items, i/2+1)
		}
	}
	grouped := sessions(g[0], 2, false)
	if len(grouped) != 2 || len(grouped[0].items) != 4 || grouped[0].items[1] != (item{0, 2}) {
		t.Errorf("grouped sessions %v: want each mode once, case by case", grouped)
	}
}

func TestPairedRatios(t *testing.T) {
	run := func(round int, pps float64) schema.Run { return schema.Run{Round: round, PPS: pps, Gbps: pps / 1e6} }
	// The machine drifts: round 2 is twice as fast for both modes.
	results := []schema.Result{
		{Layout: "docker", Mode: "vanilla", Workload: "udp", Size: 1000, Flows: 1, Testbed: "b1",
			Runs: []schema.Run{run(1, 100), run(2, 200), run(3, 100)}},
		{Layout: "docker", Mode: "falcon", Workload: "udp", Size: 1000, Flows: 1, Testbed: "b1",
			Runs: []schema.Run{run(1, 90), run(2, 180), run(3, 90)}},
		// Another testbed (not interleaved with it): mean over mean.
		{Layout: "docker", Mode: "rps", Workload: "udp", Size: 1000, Flows: 1, Testbed: "b2",
			Runs: []schema.Run{run(1, 90), run(2, 180), run(3, 90)}},
	}
	for i := range results {
		results[i].Summarize()
	}
	schema.Normalize(results, "auto")
	f := results[1]
	if !f.Paired || math.Abs(f.Normalized["pps"].Mean-0.9) > 1e-9 || f.Normalized["pps"].CI95 > 1e-9 || f.Normalized["pps"].N != 3 {
		t.Errorf("paired falcon: %+v paired=%v, want 0.9 ± 0 over 3 rounds", f.Normalized["pps"], f.Paired)
	}
	r := results[2]
	if r.Paired || math.Abs(r.Normalized["pps"].Mean-0.9) > 1e-9 || r.Normalized["pps"].CI95 < 0.1 {
		t.Errorf("unpaired rps: %+v paired=%v, want 0.9 with the drift in its interval", r.Normalized["pps"], r.Paired)
	}
	if results[0].Paired {
		t.Error("the baseline is paired with itself")
	}
}

func TestBalancedOrders(t *testing.T) {
	for n := 1; n <= 7; n++ {
		rows := balanced(n)
		place := map[[2]int]int{}   // mode, place
		follows := map[[2]int]int{} // before, after
		for _, row := range rows {
			seen := map[int]bool{}
			for j, m := range row {
				if m < 0 || m >= n || seen[m] {
					t.Fatalf("n=%d: row %v is not an order of the modes", n, row)
				}
				seen[m] = true
				place[[2]int{m, j}]++
				if j > 0 {
					follows[[2]int{row[j-1], m}]++
				}
			}
		}
		for a := range n {
			for b := range n {
				if got := place[[2]int{a, b}]; got != len(rows)/n {
					t.Errorf("n=%d: mode %d in place %d %d times in %d rows", n, a, b, got, len(rows))
				}
				// Each row has n-1 neighbours; n(n-1) ordered pairs share them.
				if got := follows[[2]int{a, b}]; a != b && got != len(rows)/n {
					t.Errorf("n=%d: %d after %d %d times in %d rows", n, b, a, got, len(rows))
				}
			}
		}
	}
}
