package modes

import (
	"reflect"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

// TestWithFalconCPUs: the bench's Falcon set reaches falcon's CPU set and
// rps's rps_cpus unless the mode's spec names its own; rfs and vanilla
// take none, and without a set nothing changes.
func TestWithFalconCPUs(t *testing.T) {
	set := []int{6, 7}
	opts := func(spec string, cpus []int) agent.Options {
		m, err := Lookup(spec)
		if err != nil {
			t.Fatal(err)
		}
		return WithFalconCPUs(m, cpus).(catalogueMode).o
	}
	if o := opts("falcon", set); !reflect.DeepEqual(o.CPUs, set) {
		t.Errorf("falcon: cpus %v", o.CPUs)
	}
	if o := opts("falcon+split", set); !reflect.DeepEqual(o.CPUs, set) || !o.Split {
		t.Errorf("falcon+split: cpus %v split %v", o.CPUs, o.Split)
	}
	if o := opts("falcon:cpus=4-5", set); !reflect.DeepEqual(o.CPUs, []int{4, 5}) {
		t.Errorf("falcon:cpus=4-5 became %v", o.CPUs)
	}
	if o := opts("rps+", set); !reflect.DeepEqual(o.RPSCPUs, set) || o.CPUs != nil {
		t.Errorf("rps+: rps_cpus %v cpus %v", o.RPSCPUs, o.CPUs)
	}
	if o := opts("rfs", set); o.RPSCPUs != nil || o.CPUs != nil {
		t.Errorf("rfs: rps_cpus %v cpus %v", o.RPSCPUs, o.CPUs)
	}
	if o := opts("falcon", nil); o.CPUs != nil {
		t.Errorf("no set: cpus %v", o.CPUs)
	}
	// The set is copied: a mode never shares the config's slice.
	o := opts("falcon", set)
	o.CPUs[0] = 99
	if set[0] != 6 {
		t.Error("the mode's CPU set aliases the config's")
	}
}

func TestRegisterModeRefusesDuplicates(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering vanilla twice did not panic")
		}
	}()
	Register(catalogueMode{spec: "vanilla"})
}

// TestCiliumRunsVanillaAlone: on k8s-cilium the comparison is Cilium
// itself, so every falcon mode is skipped with a reason and vanilla (and
// its A/A twin) runs.
func TestCiliumRunsVanillaAlone(t *testing.T) {
	for _, spec := range []string{"vanilla", "vanilla@aa"} {
		if why := Unsupported(spec, "k8s-cilium"); why != "" {
			t.Errorf("%s on k8s-cilium: %s", spec, why)
		}
	}
	for _, spec := range []string{"fastpath", "auto", "falcon", "rps", "rfs"} {
		if why := Unsupported(spec, "k8s-cilium"); why == "" {
			t.Errorf("%s on k8s-cilium: not refused", spec)
		}
		if why := Unsupported(spec, "k8s"); why != "" {
			t.Errorf("%s on k8s: %s", spec, why)
		}
	}
}
