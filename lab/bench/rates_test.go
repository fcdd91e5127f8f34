package bench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// TestResolveRates: --rates makes a case of each rate, once each, in the
// order given; the config keeps the rates only where a workload runs at
// them, and a results file's cases of one rate are normalised by the
// baseline of that rate.
func TestResolveRates(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--layouts", "host,docker", "--modes", "vanilla,falcon", "--workloads", "rates:16,rates-tcp:64K",
		"--rates", "100M,1000M,1G,500M")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"100M", "1G", "500M"}; !reflect.DeepEqual(c.Rates, want) || c.HotspotRate != "" {
		t.Errorf("rates %q (hotspot %q), want %q", c.Rates, c.HotspotRate, want)
	}
	var cases []string
	for _, tp := range mustPlan(t, c) {
		if tp.Layout != "docker" || tp.Mode != "falcon" {
			continue
		}
		for _, cs := range tp.Cases {
			cases = append(cases, cs.String())
		}
	}
	want := "docker/falcon rates 16 B at 100M, docker/falcon rates 16 B at 1G, docker/falcon rates 16 B at 500M, " +
		"docker/falcon rates-tcp 64 KiB at 100M, docker/falcon rates-tcp 64 KiB at 1G, docker/falcon rates-tcp 64 KiB at 500M"
	if got := strings.Join(cases, ", "); got != want {
		t.Errorf("cases\n %s\nwant %s", got, want)
	}
	// Packet rates are UDP's.
	if c, err = resolve(t, []int{0, 1}, "--workloads", "rates:16", "--rates", "100Kpps,400Kpps"); err != nil || !reflect.DeepEqual(c.Rates, []string{"100Kpps", "400Kpps"}) {
		t.Errorf("packet rates: %q, %v", c.Rates, err)
	}
	// Without a rates workload the config is as before --rates existed.
	if c, err = resolve(t, []int{0, 1}, "--workloads", "udp", "--rates", "1G"); err != nil || c.Rates != nil {
		t.Errorf("--rates without a rates workload: %q, %v", c.Rates, err)
	}
	// hotspot keeps its light rate and runs at each flow count.
	c, err = resolve(t, []int{0, 1}, "--layouts", "docker", "--workloads", "hotspot:1400", "--flows", "2,4", "--hotspot-rate", "10000pps")
	if err != nil || c.HotspotRate != "10Kpps" || c.Rates != nil {
		t.Fatalf("hotspot: %+v, %v", c, err)
	}
	plan := mustPlan(t, c)
	if len(plan) != 1 || len(plan[0].Cases) != 2 || plan[0].Cases[1].String() != "docker/vanilla hotspot 1400 B ×4" {
		t.Errorf("hotspot plan %+v", plan)
	}
	// hotspot-tcp takes the same light rate; a packet rate counts full
	// segments, not its writes: 20Kpps is 231.68 Mbit/s of 128 KiB writes.
	c, err = resolve(t, []int{0, 1}, "--layouts", "docker", "--workloads", "hotspot:1400,hotspot-tcp:128K", "--flows", "4")
	if err != nil || c.HotspotRate != "20Kpps" {
		t.Fatalf("hotspot-tcp: %+v, %v", c, err)
	}
	plan = mustPlan(t, c)
	if len(plan) != 1 || len(plan[0].Cases) != 2 || plan[0].Cases[1].String() != "docker/vanilla hotspot-tcp 128 KiB ×4" {
		t.Errorf("hotspot-tcp plan %+v", plan)
	}
	var udp, tcp schema.Result
	describeCase(&udp, plan[0].Cases[0], c)
	describeCase(&tcp, plan[0].Cases[1], c)
	if o := udp.Offered; o == nil || o.Spec != "20Kpps" || o.BitsPerSecond != 20e3*1400*8 {
		t.Errorf("hotspot offered %+v", o)
	}
	if o := tcp.Offered; o == nil || o.Spec != "20Kpps" || o.BitsPerSecond != 231.68e6 || o.PacketsPerSecond != 231.68e6/(128<<10*8) {
		t.Errorf("hotspot-tcp offered %+v", o)
	}
	if r, err := workload.HotspotRate("200M", true); err != nil || r != (workload.Rate{Bits: 200e6}) {
		t.Errorf("a bit rate for TCP: %+v, %v", r, err)
	}
	if !workload.IsTCP("hotspot-tcp") || workload.IsTCP("hotspot") || workload.JudgedBy("hotspot-tcp") != "gbps" {
		t.Error("hotspot-tcp is not judged as TCP, in Gbit/s")
	}
	if !strings.Contains(workload.Help(), "FALCON Fig. 19") || !strings.Contains(workload.Help(), "FALCON Fig. 16") ||
		!strings.Contains(workload.Help(), "FALCON Fig. 12 c") {
		t.Error("the workloads' help does not name their figures")
	}
	if got := tools(schema.Config{Workloads: []string{"rates", "hotspot", "overload-latency"}}); !reflect.DeepEqual(got, []string{"iperf3", "sockperf"}) {
		t.Errorf("tools %v", got)
	}
}

func TestNormalizeByRate(t *testing.T) {
	run := func(busy float64) schema.Run {
		return schema.Run{PPS: 1000, WindowS: 1, CPU: map[int]procfs.CPUWindow{0: {Usage: procfs.CPUUsage{Soft: busy / 2, Idle: 100 - busy/2}},
			1: {Usage: procfs.CPUUsage{Sys: busy / 2, Idle: 100 - busy/2}}}}
	}
	res := func(mode, rate string, busy float64) schema.Result {
		r := schema.Result{Layout: "docker", Mode: mode, Workload: "rates", Size: 16, Flows: 1, Testbed: mode,
			Offered: offered(rate, 16), Runs: []schema.Run{run(busy)}}
		r.Summarize()
		return r
	}
	results := []schema.Result{res("vanilla", "100M", 40), res("vanilla", "1G", 100), res("falcon", "100M", 30), res("falcon", "1G", 120)}
	schema.Normalize(results, "auto")
	for i, want := range []float64{1, 1, 0.75, 1.2} {
		got := results[i].Normalized["cpu_total_busy"].Mean
		if d := got - want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s at %s: cpu_total_busy × baseline %g, want %g", results[i].Mode, results[i].Offered.Spec, got, want)
		}
	}
	if h := workload.JudgedBy("rates"); h != "cpu_total_busy" {
		t.Errorf("rates judged by %s", h)
	}
	m := schema.Metrics(run(60))
	for k, want := range map[string]float64{"cpu_total_busy": 60, "cpu_total_soft": 30, "cpu_total_sys": 30, "cpu_total_usr": 0} {
		if m[k] != want {
			t.Errorf("%s = %g, want %g", k, m[k], want)
		}
	}
}

// TestMaxSteal: a run's steal is its most robbed CPU's, which --max-steal
// compares with.
func TestMaxSteal(t *testing.T) {
	rec := schema.Run{CPU: map[int]procfs.CPUWindow{0: {Usage: procfs.CPUUsage{Steal: 4}}, 1: {Usage: procfs.CPUUsage{Steal: 31}}}}
	if got := maxSteal(rec); got != 31 {
		t.Errorf("maxSteal = %g, want 31", got)
	}
	if got := maxSteal(schema.Run{}); got != 0 {
		t.Errorf("no CPUs: %g, want 0", got)
	}
	for _, v := range []string{"-1", "100"} {
		if _, err := resolve(t, []int{0, 1}, "--max-steal", v); err == nil || !strings.Contains(err.Error(), "--max-steal "+v+": a percentage") {
			t.Errorf("--max-steal %s: %v", v, err)
		}
	}
	if c, err := resolve(t, []int{0, 1}, "--max-steal", "5"); err != nil || c.MaxStealPct != 5 {
		t.Errorf("--max-steal 5: %v, %g", err, c.MaxStealPct)
	}
}
