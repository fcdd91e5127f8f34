package bench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
)

func planCases(t *testing.T, c schema.Config) []string {
	t.Helper()
	var out []string
	for _, tp := range mustPlan(t, c) {
		for _, cs := range tp.Cases {
			out = append(out, cs.String())
		}
	}
	return out
}

// TestMflowPresets: mflow7 sweeps the batch for one TCP 64 KiB flow with
// every flow split, taking turns; mflow8 is one flow at every size, UDP
// and TCP, native and docker's modes, mflow splitting UDP too. Both go
// through the catalogue as any --modes does, and flags still win.
func TestMflowPresets(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--preset", "mflow7")
	if err != nil {
		t.Fatal(err)
	}
	wantModes := []string{"vanilla"}
	for _, n := range []string{"16", "32", "64", "128", "256", "512", "1024"} {
		wantModes = append(wantModes, "mflow:batch="+n+",elephant=0")
	}
	if !reflect.DeepEqual(c.Modes, wantModes) || !reflect.DeepEqual(c.Layouts, []string{"docker"}) ||
		!reflect.DeepEqual(c.Workloads, []string{"tcp:64K"}) || !reflect.DeepEqual(c.Flows, []int{1}) ||
		c.Runs != 3 || !c.Interleave || c.Duration.String() != "5s" {
		t.Errorf("mflow7: %+v", c)
	}
	cases := planCases(t, c)
	if len(cases) != 8 || cases[0] != "docker/vanilla tcp 64 KiB" || cases[7] != "docker/mflow:batch=1024,elephant=0 tcp 64 KiB" {
		t.Errorf("mflow7 cases %q", cases)
	}
	for i, n := range []int{0, 16, 32, 64, 128, 256, 512, 1024} {
		m, err := schema.ParseMode(c.Modes[i])
		if err != nil || m.Opts.Batch != n || (n > 0 && (m.Opts.Elephant != 0 || !m.Opts.Split)) {
			t.Errorf("mode %s: %+v, %v", c.Modes[i], m.Opts, err)
		}
	}

	c, err = resolve(t, []int{0, 1}, "--preset", "mflow8")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Modes, []string{"vanilla", "rps", "falcon", "mflow:allow-reorder=true,elephant=0"}) ||
		!reflect.DeepEqual(c.Layouts, []string{"host", "docker"}) || !reflect.DeepEqual(c.Workloads, []string{"udp-stress", "tcp"}) ||
		!reflect.DeepEqual(c.Sizes, []int{16, 64, 256, 1024, 1400, 4096, 16384, 65507}) || c.Clients != 3 {
		t.Errorf("mflow8: %+v", c)
	}
	plan, skipped, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 5 || len(skipped) != 3 || plan[0].Layout != "host" || plan[0].Mode != "vanilla" || len(plan[0].Cases) != 16 ||
		plan[4].Mode != "mflow:allow-reorder=true,elephant=0" {
		t.Errorf("mflow8 plan: %d testbeds, skipped %q", len(plan), skipped)
	}
	if m, err := schema.ParseMode("mflow:allow-reorder=true,elephant=0"); err != nil || !m.Opts.AllowReorder || m.Opts.Batch != 256 {
		t.Errorf("mflow8's mflow: %+v, %v", m.Opts, err)
	}

	// The cut-down equivalent: flags given win over the preset's.
	c, err = resolve(t, []int{0, 1}, "--preset", "mflow7", "--runs", "1", "--duration", "2s",
		"--modes", "vanilla,mflow:batch=16,elephant=0,mflow:batch=256,elephant=0")
	if err != nil || c.Runs != 1 || len(c.Modes) != 3 || c.Modes[2] != "mflow:batch=256,elephant=0" {
		t.Errorf("mflow7 cut down: %+v, %v", c, err)
	}
	help := PresetHelp()
	for _, s := range []string{"MFLOW Fig. 7", "MFLOW Fig. 8", "100 G NICs", "mflow:allow-reorder=true,elephant=0", "shared with the sender"} {
		if !strings.Contains(help, s) {
			t.Errorf("preset help does not say %q", s)
		}
	}
}
