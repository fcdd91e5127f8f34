package bench

import "testing"

// TestBenchNewWorkloads runs overload-latency, rates and hotspot on a
// docker testbed with falcon: each run keeps its search, its CPU by the
// clock or its series.
func TestBenchNewWorkloads(t *testing.T) {
	online, name := integration(t, "n")
	f := benchRun(t, online, name, "--layouts", "docker", "--modes", "falcon",
		"--workloads", "overload-latency:1400,rates:1400,hotspot:1400", "--rates", "10Kpps,20Kpps", "--hotspot-rate", "5Kpps",
		"--flows", "2", "--runs", "1", "--duration", "1s")
	if len(f.Results) != 4 {
		t.Fatalf("%d results, want overload-latency, rates at 2 rates and hotspot", len(f.Results))
	}
	eachRun(t, f, func(what string, r Result, run Run) {
		switch r.Workload {
		case "overload-latency":
			o := run.Overload
			if o == nil || len(o.Steps) == 0 || o.RatePPS < minRatePPS || run.Latency == nil || run.Latency.P99Us <= 0 {
				t.Errorf("%s: search %+v, latency %+v", what, o, run.Latency)
			}
		case "rates":
			if r.Offered == nil || len(run.BusyPct) != len(run.CPU) || run.PPS < 0.9*r.Offered.PacketsPerSecond || r.Summary["cpu_total_busy"].Mean <= 0 {
				t.Errorf("%s: offered %+v, %.0f/s delivered, busy %v", what, r.Offered, run.PPS, run.BusyPct)
			}
		case "hotspot":
			h := run.Hotspot
			if h == nil || len(h.Flows) != 2 || h.Flows[1].BeforePPS < 4000 || h.Flows[0].AfterPPS < 2*h.Flows[0].BeforePPS {
				t.Errorf("%s: series %+v", what, h)
			}
		}
	})
}
