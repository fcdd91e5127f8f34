package bench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]workload.Rate{"100M": {Bits: 100e6}, "1G": {Bits: 1e9}, "1.5G": {Bits: 1.5e9}, "800k": {Bits: 800e3},
		"2000000": {Bits: 2e6}, " 2 G ": {Bits: 2e9}, "400Kpps": {PPS: 400e3}, "400kPPS": {PPS: 400e3}, "1Mpps": {PPS: 1e6}, "250pps": {PPS: 250}} {
		got, err := workload.ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		back, err := workload.ParseRate(got.String())
		if err != nil || back != got {
			t.Errorf("ParseRate(%q) = %+v writes as %q, which reads as %+v, %v", in, got, got.String(), back, err)
		}
	}
	for n, want := range map[workload.Rate]string{{Bits: 1e9}: "1G", {Bits: 1.5e9}: "1.5G", {Bits: 1500}: "1.5K", {Bits: 1234567}: "1234.567K",
		{PPS: 400e3}: "400Kpps", {PPS: 250}: "250pps"} {
		if got := n.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", n, got, want)
		}
	}
	for _, in := range []string{"", "0", "M", "pps", "-1M", "1e9", "NaN", "Inf", "0x10", "1T", "1 Gbit/s", "1Gbps", "1.5.0M", "200G", "100pps", "1G pps x"} {
		if got, err := workload.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %+v, want an error", in, got)
		}
	}
	// A packet rate is the bit rate of its datagrams.
	if bits, pps := (workload.Rate{PPS: 400e3}).At(16); bits != 400e3*16*8 || pps != 400e3 {
		t.Errorf("400Kpps at 16 B: %g bit/s, %g/s", bits, pps)
	}
	if bits, pps := (workload.Rate{Bits: 1e9}).At(1250); bits != 1e9 || pps != 1e5 {
		t.Errorf("1G at 1250 B: %g bit/s, %g/s", bits, pps)
	}
}

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
	if r, err := hotspotRate("200M", true); err != nil || r != (workload.Rate{Bits: 200e6}) {
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

// receiver models a sender of at most sender messages/s into a receiver
// that takes capacity/s and drops the rest (collapsing to flooded/s when
// sent flat out, if flooded is set).
func receiver(capacity, sender, flooded float64) func(float64) (schema.OverloadStep, error) {
	return func(target float64) (schema.OverloadStep, error) {
		st := schema.OverloadStep{Mode: "under-load", TargetPPS: target, SentPPS: min(target, sender)}
		recv := min(st.SentPPS, capacity)
		if target == 0 {
			st.Mode, st.SentPPS, recv = "throughput", sender, min(sender, capacity)
			if flooded > 0 {
				recv = flooded
			}
		}
		st.Sent, st.Received = int64(st.SentPPS), int64(recv)
		st.LossPct = lossPct(st.Sent, st.Received)
		st.Pass = st.LossPct <= schema.OverloadMaxLossPct
		return st, nil
	}
}

func TestSearchRate(t *testing.T) {
	for _, c := range []struct {
		name                      string
		capacity, sender, flooded float64
		lo, hi                    float64
		senderLimited             bool
		maxSteps                  int
	}{
		{"receiver the limit", 300e3, 1e6, 0, 300e3 * (1 - schema.OverloadPrecision), 300e3, false, 4},
		{"sender the limit", 2e6, 1e6, 0, 1e6, 1e6, true, 1},
		{"receiver collapses when flooded", 300e3, 1e6, 150e3, 300e3 * (1 - schema.OverloadPrecision), 300e3, false, overloadMaxSteps + 1},
	} {
		s, err := searchRate(receiver(c.capacity, c.sender, c.flooded), false)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.RatePPS < c.lo || s.RatePPS > c.hi || s.SenderLimited != c.senderLimited || len(s.Steps) > c.maxSteps || len(s.Steps) == 0 {
			t.Errorf("%s: found %.0f/s (sender-limited %v) in %d steps; want %.0f..%.0f, sender-limited %v, at most %d steps: %s",
				c.name, s.RatePPS, s.SenderLimited, len(s.Steps), c.lo, c.hi, c.senderLimited, c.maxSteps, stepsLine(s.Steps))
		}
		if s.Steps[0].Mode != "throughput" || s.MaxLossPct != schema.OverloadMaxLossPct {
			t.Errorf("%s: first step %+v", c.name, s.Steps[0])
		}
	}
	// A sender that cannot reach the rates it is asked for (here: from
	// 500k/s up, while flat out it made 1M/s) stops the search where the
	// receiver kept up with it.
	short := func(target float64) (schema.OverloadStep, error) {
		st, _ := receiver(600e3, 1e6, 0)(target)
		if target >= 500e3 {
			st.SentPPS, st.Sent, st.Received, st.LossPct, st.Pass = 450e3, 450e3, 450e3, 0, true
		}
		return st, nil
	}
	if s, err := searchRate(short, false); err != nil || s.RatePPS != 450e3 || !s.SenderLimited {
		t.Errorf("short sender: %+v, %v", s, err)
	}
	// Drops everywhere: an error naming the steps.
	lossy := func(target float64) (schema.OverloadStep, error) {
		st, _ := receiver(1e6, 1e6, 0)(target)
		st.Received, st.LossPct, st.Pass = st.Sent/2, 50, false
		return st, nil
	}
	if s, err := searchRate(lossy, false); err == nil || !strings.Contains(err.Error(), "no rate passed") || len(s.Steps) != overloadMaxSteps+1 {
		t.Errorf("drops everywhere: %+v, %v", s, err)
	}
	// TCP: the flat-out rate is probed, and passes where the sender keeps it.
	tcp := func(target float64) (schema.OverloadStep, error) {
		st, _ := receiver(200e3, 200e3, 0)(target)
		st.Pass = target == 0 || st.SentPPS >= overloadSenderShort*target
		return st, nil
	}
	if s, err := searchRate(tcp, true); err != nil || s.RatePPS != 200e3 || s.SenderLimited || len(s.Steps) != 2 {
		t.Errorf("tcp: %+v, %v", s, err)
	}
}

// TestCPUBusyByTheClock: busy is what the idle loop did not take of the
// window, whatever the ticks charged the rest to.
func TestCPUBusyByTheClock(t *testing.T) {
	snap := func(idle0, iow0, idle1 uint64) procfs.Snapshot {
		return procfs.Snapshot{Stat: procfs.Stat{CPU: map[int]procfs.CPUTimes{0: {Idle: idle0, IOWait: iow0, User: 5}, 1: {Idle: idle1}}}}
	}
	// 2 s: CPU 0 idle 1.5 s (0.1 of it in iowait), CPU 1 idle 2 s; CPU 2
	// came online inside the window and is left out.
	after := snap(1000+140, 10, 500+200)
	after.Stat.CPU[2] = procfs.CPUTimes{Idle: 7}
	got := cpuBusy(snap(1000, 0, 500), after, 2)
	if len(got) != 2 || got[0] != 25 || got[1] != 0 {
		t.Errorf("busy %v, want CPU 0 25 %%, CPU 1 0 %%", got)
	}
	if cpuBusy(snap(0, 0, 0), snap(0, 0, 0), 0) != nil {
		t.Error("an empty window has a busy share")
	}
	// The clock's busy share is what the run is judged by; the ticks'
	// split stays beside it.
	r := schema.Run{WindowS: 2, BusyPct: got, CPU: map[int]procfs.CPUWindow{0: {Usage: procfs.CPUUsage{Soft: 10, Idle: 90}}, 1: {Usage: procfs.CPUUsage{Idle: 100}}}}
	m := schema.Metrics(r)
	if m["cpu_total_busy"] != 25 || m["cpu_total_sampled_busy"] != 10 || m["cpu0_busy_clock"] != 25 || m["cpu_total_soft"] != 10 {
		t.Errorf("metrics %v", m)
	}
}
