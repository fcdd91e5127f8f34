package bench

import (
	"testing"
	"time"
)

// TestFigurePresetsQuick runs three figure presets with --quick, each a
// different kind of bench (CPU usage by kind, the hotspot's time series
// with the static policy, the fixed-rate sweep with its CPU split), end to
// end on real testbeds. Every preset is resolved by the unit tests; all of
// them with --quick take about 25 minutes here, too long for the suite:
// `falcon-lab bench --preset paper-all --quick` runs them (results/paper-all-2cpu-vm).
func TestFigurePresetsQuick(t *testing.T) {
	online, name := integration(t, "f")
	for _, p := range []string{"hotcloud6", "fig16", "fig19"} {
		t.Run(p, func(t *testing.T) {
			start := time.Now()
			f := benchRun(t, online, name, "--preset", p, "--quick")
			if len(f.Results) == 0 {
				t.Fatal("no results")
			}
			for _, r := range f.Results {
				if len(r.Errors) > 0 || len(r.Runs) != 1 {
					t.Errorf("%s/%s %s: %d runs, errors %q", r.Layout, r.Mode, r.Workload, len(r.Runs), r.Errors)
				}
			}
			t.Logf("%d results in %s", len(f.Results), time.Since(start).Round(100*time.Millisecond))
		})
	}
}
