package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/falconnet/falcon/internal/agent"
)

// reports are falcon status's test reports: an agent with stages and
// split, a static mode, and nothing enabled.
func reports(t *testing.T) []*agent.Report {
	t.Helper()
	b, err := os.ReadFile("../agent/testdata/reports.json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []*agent.Report
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// parse reads exposition text with the Prometheus client's own parser.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parse metrics: %v\n%s", err, text)
	}
	return fams
}

// scrape serves a collector as the agent does and fetches /metrics.
func scrape(t *testing.T, c *Collector) map[string]*dto.MetricFamily {
	t.Helper()
	s := NewServer(nil, c, testLog(t))
	rec := httptest.NewRecorder()
	s.srv.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body)
	}
	return parse(t, rec.Body.Bytes())
}

// value finds the sample of family name whose labels include want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		if !matches(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestCollectorMirrorsStatus(t *testing.T) {
	r := reports(t)[0]
	fams := scrape(t, newCollector("v-test", func() (*agent.Report, error) { return r, nil }))
	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		got, ok := value(fams, name, labels)
		if !ok || got != want {
			t.Errorf("%s%v = %v (found %v), want %v", name, labels, got, ok, want)
		}
	}
	check("falcon_build_info", map[string]string{"version": "v-test"}, 1)
	check("falcon_enabled", map[string]string{"mode": r.Mode}, 1)
	check("falcon_threshold_ratio", nil, float64(r.Threshold)/100)
	for cpu, pct := range r.Load.PerCPU {
		check("falcon_cpu_load_ratio", map[string]string{"cpu": itoa(cpu), "in_set": "true"}, float64(pct)/100)
	}
	for _, s := range r.Stages {
		hook := map[string]string{"hook": s.Device, "netns": s.Netns, "role": string(s.Role)}
		with := func(kv ...string) map[string]string {
			m := maps.Clone(hook)
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		for cpu, n := range s.RanOn {
			check("falcon_stage_packets_total", with("cpu", itoa(cpu)), float64(n))
		}
		for cpu, n := range s.SteeredTo {
			check("falcon_steered_packets_total", with("cpu", itoa(cpu)), float64(n))
		}
		for cpu, d := range s.DecisionsPerCPU {
			c := itoa(cpu)
			check("falcon_decisions_total", with("cpu", c, "decision", "first"), float64(d.First))
			check("falcon_decisions_total", with("cpu", c, "decision", "second"), float64(d.Second))
			check("falcon_decisions_total", with("cpu", c, "decision", "fallback"), float64(d.Fallback))
			check("falcon_kept_decisions_total", with("cpu", c), float64(d.FlowletHits))
			check("falcon_guard_holds_total", with("cpu", c), float64(d.GuardHolds))
			check("falcon_guard_moves_total", with("cpu", c), float64(d.Moved))
			check("falcon_guard_timeouts_total", with("cpu", c), float64(d.GuardTimeouts))
		}
		// Summed over cpu, what falcon status shows per hook.
		for name, want := range map[string]uint64{
			"falcon_decisions_total":      s.Decisions.First + s.Decisions.Second + s.Decisions.Fallback,
			"falcon_kept_decisions_total": s.Decisions.FlowletHits,
			"falcon_guard_holds_total":    s.Decisions.GuardHolds,
			"falcon_guard_moves_total":    s.Decisions.Moved,
			"falcon_guard_timeouts_total": s.Decisions.GuardTimeouts,
		} {
			if got := total(fams, name, hook); got != float64(want) {
				t.Errorf("%s%v summed over cpu = %v, want the hook's %d", name, hook, got, want)
			}
		}
	}
	for cpu, st := range r.Split.PerCPU {
		check("falcon_split_queued_frames_total", map[string]string{"cpu": itoa(cpu)}, float64(st.Enqueued))
	}
	for name, f := range fams {
		if !slices.Contains(Names(), name) && !isRuntime(name) {
			t.Errorf("exposes %s (%v), which the table of metrics lacks", name, f.GetType())
		}
	}
}

// Metrics of a static mode or of no agent say so, and nothing of a datapath.
func TestCollectorWithoutDatapath(t *testing.T) {
	for _, r := range reports(t)[1:] {
		fams := scrape(t, newCollector("v", func() (*agent.Report, error) { return r, nil }))
		if v, ok := value(fams, "falcon_enabled", nil); !ok || v != map[bool]float64{true: 1}[r.Enabled] {
			t.Errorf("mode %q: falcon_enabled %v %v", r.Mode, v, ok)
		}
		if _, ok := fams["falcon_stage_packets_total"]; ok {
			t.Errorf("mode %q: stage counters without a datapath", r.Mode)
		}
	}
}

// A namespace whose state cannot be read still gets build_info served.
func TestCollectorStatusError(t *testing.T) {
	fams := scrape(t, newCollector("v", func() (*agent.Report, error) { return nil, errors.New("boom") }))
	if _, ok := value(fams, "falcon_build_info", nil); !ok {
		t.Error("build_info missing when status fails")
	}
}
