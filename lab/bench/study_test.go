package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestStudyPreset: the study's sweep becomes one calico testbed per
// replica count with as many containers per host, each with one case of
// that many 128 KiB TCP flows.
func TestStudyPreset(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--preset", "k8s-rps-rfs")
	if err != nil {
		t.Fatal(err)
	}
	if !c.ContainersPerFlow || c.Containers != 0 || time.Duration(c.Duration) != 5*time.Second || c.Runs != 5 ||
		!reflect.DeepEqual(c.Layouts, []string{"calico"}) || !reflect.DeepEqual(c.Flows, []int{1, 2, 4, 8, 16}) {
		t.Errorf("config %+v", c)
	}
	// The study's modes and falcon, all from the agent's catalogue.
	modes := []string{"vanilla", "rps", "rps+", "rfs", "rfs+", "falcon"}
	if !reflect.DeepEqual(c.Modes, modes) {
		t.Errorf("modes %v", c.Modes)
	}
	plan, _, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tp := range plan {
		for _, cs := range tp.Cases {
			if cs.Flows != tp.Containers {
				t.Errorf("%s on a testbed of %d containers per host", cs, tp.Containers)
			}
			got = append(got, cs.String())
		}
	}
	var want []string
	for _, m := range modes {
		want = append(want, "calico/"+m+" multi-flow-tcp 128 KiB", "calico/"+m+" multi-flow-tcp 128 KiB ×2",
			"calico/"+m+" multi-flow-tcp 128 KiB ×4", "calico/"+m+" multi-flow-tcp 128 KiB ×8", "calico/"+m+" multi-flow-tcp 128 KiB ×16")
	}
	if len(plan) != 5*len(modes) || !reflect.DeepEqual(got, want) {
		t.Errorf("%d testbeds, cases %q; want %d testbeds, %q", len(plan), got, 5*len(modes), want)
	}
	// Given flags win over the preset.
	if c, err := resolve(t, []int{0, 1}, "--preset", "k8s-rps-rfs", "--duration", "30s", "--flows", "1,4"); err != nil ||
		time.Duration(c.Duration) != 30*time.Second || !reflect.DeepEqual(c.Flows, []int{1, 4}) {
		t.Errorf("overrides: %v, %+v", err, c)
	}
}

func TestContainersFlag(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--layouts", "docker", "--containers", "flows", "--workloads", "tcp:64K,multi-flow:16", "--flows", "3")
	if err != nil {
		t.Fatal(err)
	}
	plan, _, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].Containers != 1 || plan[1].Containers != 3 || len(plan[0].Cases) != 1 || plan[1].Cases[0].Flows != 3 {
		t.Errorf("plan %+v", plan)
	}
	if c, err := resolve(t, []int{0, 1}, "--containers", "4"); err != nil || c.Containers != 4 || c.ContainersPerFlow {
		t.Errorf("--containers 4: %v, %+v", err, c)
	}
	for _, bad := range [][]string{{"--containers", "0"}, {"--containers", "81"}, {"--containers", "some"},
		{"--containers", "flows", "--flows", "1,96"}} {
		_, err := resolve(t, []int{0, 1}, bad...)
		if _, ok := err.(*ConfigError); !ok || !strings.Contains(err.Error(), "--containers") {
			t.Errorf("%q: %v, want a --containers config error", bad, err)
		}
	}
}
