package measure

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// series reads an iperf3 client's output recorded with
// --get-server-output against a server reporting every 0.1 s.
func series(t *testing.T, name string) workload.Iperf3Series {
	t.Helper()
	b, err := os.ReadFile("../workload/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := workload.ParseIperf3Series(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHotspotSeries lays recorded clients on a run's clock: flow 0 light
// for 2 s and then flat out, flow 1 light throughout; the window's halves
// are averaged apart.
func TestHotspotSeries(t *testing.T) {
	light, heavy := series(t, "iperf3-udp-series.json"), series(t, "iperf3-udp-series-heavy.json")
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	clients := []hotspotClient{
		{Flow: 0, Phases: []hotspotPhase{{Launched: at(-0.1), Exited: at(1.95), Result: light, Bitrate: "20000000"},
			{Launched: at(2), Exited: at(3.05), Heavy: true, Result: heavy, Bitrate: "0"}}},
		{Flow: 1, Phases: []hotspotPhase{{Launched: at(-0.1), Exited: at(1.95), Result: light, Bitrate: "20000000"}}},
	}
	h := hotspotSeries(clients, t0, 500*time.Millisecond, 2, 1400, false, []string{"a -> b", "c -> d"})
	if h.Protocol != "UDP" || h.IntervalS != 0.1 || h.WindowStartS != 0.5 || h.WindowEndS != 2.5 || h.LightEndS != 1.95 || h.HeavyAtS != 2 || len(h.Flows) != 2 {
		t.Fatalf("series %+v", h)
	}
	f0, f1 := h.Flows[0], h.Flows[1]
	// The heavy client's last interval is a tail of 68 µs, left out.
	if !f0.Heavy || f1.Heavy || f0.Endpoint != "a -> b" || len(f0.Points) != len(light.Intervals)+len(heavy.Intervals)-1 ||
		len(f1.Points) != len(light.Intervals) {
		t.Fatalf("flows %+v %+v", f0, f1)
	}
	// 20 Mbit/s of 1400 B is 1786 datagrams/s.
	for _, f := range []schema.FlowSeries{f0, f1} {
		if f.BeforePPS < 1600 || f.BeforePPS > 2000 || f.BeforeGbps < 0.018 || f.BeforeGbps > 0.022 {
			t.Errorf("flow %d before the switch: %.0f/s, %.4f Gbit/s", f.Flow, f.BeforePPS, f.BeforeGbps)
		}
	}
	if f0.AfterPPS < 10*f0.BeforePPS || f1.AfterPPS != 0 {
		t.Errorf("after the switch: heavy flow %.0f/s, light flow %.0f/s (it had ended)", f0.AfterPPS, f1.AfterPPS)
	}
	// The points are the receiver's, on the run's clock.
	p := f0.Points[len(light.Intervals)]
	if !p.Heavy || p.T < 2.09 || p.T > 2.11 || math.Abs(p.PPS-p.Gbps*1e9/(8*1400)) > 1e-6*p.PPS {
		t.Errorf("first heavy point %+v", p)
	}
	m := schema.Metrics(schema.Run{Hotspot: h})
	if m["hotspot_heavy_after_pps"] != f0.AfterPPS || m["hotspot_light_before_pps"] != f1.BeforePPS || m["hotspot_after_pps"] != f0.AfterPPS {
		t.Errorf("metrics %v", m)
	}
}

// TestHotspotSeriesTCP: hotspot-tcp's recorded clients (128 KiB writes at
// 20K full segments/s, then flat out on the same 5-tuple) in Gbit/s, with
// no datagrams/s, in the metrics and the table.
func TestHotspotSeriesTCP(t *testing.T) {
	light, heavy := series(t, "iperf3-tcp-series.json"), series(t, "iperf3-tcp-series-heavy.json")
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	clients := []hotspotClient{
		{Flow: 0, Phases: []hotspotPhase{{Launched: at(-0.1), Exited: at(1.95), Result: light, Bitrate: "231680000"},
			{Launched: at(2), Exited: at(3.05), Heavy: true, Result: heavy, Bitrate: "0"}}},
		{Flow: 1, Phases: []hotspotPhase{{Launched: at(-0.1), Exited: at(1.95), Result: light, Bitrate: "231680000"}}},
	}
	h := hotspotSeries(clients, t0, 500*time.Millisecond, 2, 128<<10, true, []string{"a -> b", "c -> d"})
	if h.Protocol != "TCP" || h.HeavyAtS != 2 || len(h.Flows) != 2 {
		t.Fatalf("series %+v", h)
	}
	f0, f1 := h.Flows[0], h.Flows[1]
	// The heavy client's tail of 0.6 ms is left out.
	if len(f0.Points) != len(light.Intervals)+len(heavy.Intervals)-1 || len(f1.Points) != len(light.Intervals) {
		t.Fatalf("flows %+v %+v", f0, f1)
	}
	for _, f := range []schema.FlowSeries{f0, f1} {
		if f.BeforeGbps < 0.2 || f.BeforeGbps > 0.26 || f.BeforePPS != 0 || f.AfterPPS != 0 {
			t.Errorf("flow %d before the switch: %.4f Gbit/s (%.0f/s, %.0f/s: none for TCP)", f.Flow, f.BeforeGbps, f.BeforePPS, f.AfterPPS)
		}
		for _, p := range f.Points {
			if p.PPS != 0 {
				t.Fatalf("flow %d: a TCP point with datagrams/s: %+v", f.Flow, p)
			}
		}
	}
	if f0.AfterGbps < 10*f0.BeforeGbps || f1.AfterGbps != 0 {
		t.Errorf("after the switch: heavy flow %.3f Gbit/s, light flow %.3f (it had ended)", f0.AfterGbps, f1.AfterGbps)
	}
	// The window's rate: each flow's mean over its intervals in the window.
	if g := h.WindowGbps(); g < f0.BeforeGbps+f1.BeforeGbps || g > f0.AfterGbps+f1.BeforeGbps {
		t.Errorf("window %.3f Gbit/s", g)
	}
	m := schema.Metrics(schema.Run{Hotspot: h})
	if _, ok := m["hotspot_heavy_after_pps"]; ok || m["hotspot_heavy_after_gbps"] != f0.AfterGbps || m["hotspot_light_before_gbps"] != f1.BeforeGbps {
		t.Errorf("metrics %v", m)
	}
	// The table: TCP's in Gbit/s with the out-of-order segments, apart
	// from UDP's in datagrams/s.
	ooo, retrans := int64(3), int64(7)
	udp := hotspotSeries(clients, t0, 500*time.Millisecond, 2, 1400, false, nil)
	res := []schema.Result{
		{Layout: "docker", Mode: "vanilla", Workload: "hotspot-tcp", Size: 128 << 10, Flows: 2, Offered: &schema.Offered{Spec: "20Kpps", BitsPerSecond: 231.68e6},
			Runs: []schema.Run{{Hotspot: h, OutOfOrder: &ooo, Retransmits: &retrans}}},
		{Layout: "docker", Mode: "vanilla", Workload: "hotspot", Size: 1400, Flows: 2, Offered: &schema.Offered{Spec: "20Kpps", BitsPerSecond: 224e6},
			Runs: []schema.Run{{Hotspot: udp}}},
	}
	for i := range res {
		res[i].Summarize()
	}
	var b strings.Builder
	if err := render.WriteTable(&b, &schema.File{Results: res}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Hotspot (FALCON Fig. 16)", "heavy flow before → after, datagrams/s", "Hotspot over TCP",
		"heavy flow before → after, Gbit/s", "| docker | vanilla | 128 KiB | 2 | 20Kpps = 231.68M | 1.50 s | 0.2", "| 3 | 7 |\n",
		"| docker | vanilla | 1400 B | 2 | 20Kpps | 1.50 s | "} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// TestHotspotTiming: flow 0 stays light to about the middle of the
// window, in whole seconds.
func TestHotspotTiming(t *testing.T) {
	for _, c := range []struct {
		warmup, duration, want time.Duration
	}{
		{500 * time.Millisecond, 2 * time.Second, 2 * time.Second},
		{500 * time.Millisecond, 4 * time.Second, 3 * time.Second},
		{0, 2 * time.Second, time.Second},
		{time.Second, 10 * time.Second, 6 * time.Second},
	} {
		e := &env{cfg: schema.Config{Warmup: schema.Duration(c.warmup), Duration: schema.Duration(c.duration)}}
		if got := e.lightTime(); got != c.want {
			t.Errorf("warm-up %s, window %s: light for %s, want %s", c.warmup, c.duration, got, c.want)
		}
	}
	if !strings.Contains(workload.Help(), "same 5-tuple") {
		t.Error("hotspot's help does not say how the flow turns heavy")
	}
}
