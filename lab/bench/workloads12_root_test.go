package bench

import (
	"testing"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// TestBenchNewWorkloads runs overload-latency, rates and hotspot on a
// docker testbed with falcon: each run keeps its search, its CPU by the
// clock or its series; and hotspot-tcp on one with vanilla, whose heavy
// flow rises after the switch without a segment out of order.
func TestBenchNewWorkloads(t *testing.T) {
	online, name := integration(t, "n")
	f := benchRun(t, online, name, "--layouts", "docker", "--modes", "falcon",
		"--workloads", "overload-latency:1400,rates:1400,hotspot:1400", "--rates", "10Kpps,20Kpps", "--hotspot-rate", "5Kpps",
		"--flows", "2", "--runs", "1", "--duration", "1s")
	if len(f.Results) != 4 {
		t.Fatalf("%d results, want overload-latency, rates at 2 rates and hotspot", len(f.Results))
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		switch r.Workload {
		case "overload-latency":
			o := run.Overload
			if o == nil || len(o.Steps) == 0 || o.RatePPS < workload.MinRatePPS || run.Latency == nil || run.Latency.P99Us <= 0 {
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
	// hotspot-tcp, quick: 2 flows of 128 KiB writes at 20K full segments/s
	// (231.68 Mbit/s), flow 0 flat out from the switch on.
	f = benchRun(t, online, name, "--layouts", "docker", "--modes", "vanilla", "--workloads", "hotspot-tcp:128K",
		"--flows", "2", "--quick")
	if len(f.Results) != 1 {
		t.Fatalf("%d results, want hotspot-tcp", len(f.Results))
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		h := run.Hotspot
		if h == nil || h.Protocol != "TCP" || len(h.Flows) != 2 || run.OutOfOrder == nil || run.Reordering == nil || run.Gbps <= 0 {
			t.Fatalf("%s: series %+v, out of order %v, reordering %+v, %.3f Gbit/s", what, h, run.OutOfOrder, run.Reordering, run.Gbps)
		}
		heavy, light := h.Flows[0], h.Flows[1]
		if heavy.BeforeGbps < 0.15 || heavy.AfterGbps < 3*heavy.BeforeGbps || light.BeforeGbps < 0.15 || heavy.Points[0].PPS != 0 {
			t.Errorf("%s: heavy flow %.3f → %.3f Gbit/s, light flow %.3f before", what, heavy.BeforeGbps, heavy.AfterGbps, light.BeforeGbps)
		}
		if *run.OutOfOrder != 0 {
			t.Errorf("%s: vanilla: %d segments out of order", what, *run.OutOfOrder)
		}
		t.Logf("%s: heavy flow %.3f → %.3f Gbit/s, light flow %.3f → %.3f, %d out of order, switch %.2f s into the window",
			what, heavy.BeforeGbps, heavy.AfterGbps, light.BeforeGbps, light.AfterGbps, *run.OutOfOrder, h.HeavyAtS-h.WindowStartS)
	})
}
