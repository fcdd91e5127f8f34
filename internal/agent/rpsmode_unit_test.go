package agent

import (
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cpuset"
)

func TestFlowCount(t *testing.T) {
	for _, c := range []struct{ entries, queues, want int }{
		{32768, 1, 32768}, // the study: one queue, the same as the global table
		{32768, 16, 2048}, // scaling.rst's example
		{32768, 3, 8192},  // 10922 rounded down: the kernel would round up to 16384
		{32768, 0, 32768},
		{4, 8, 1},
		{1 << 29, 1, 1 << 29},
	} {
		if got := FlowCount(c.entries, c.queues); got != c.want {
			t.Errorf("FlowCount(%d, %d) = %d, want %d", c.entries, c.queues, got, c.want)
		}
	}
}

func TestCheckFlowEntries(t *testing.T) {
	for _, n := range []int{1, 2, 4096, 32768, MaxFlowEntries} {
		if err := checkFlowEntries(n); err != nil {
			t.Errorf("%d: %v", n, err)
		}
	}
	for n, want := range map[int]string{
		0:                  "0 would switch RFS off",
		-4:                 "want a power of two",
		1000:               "not a power of two (the kernel would round it up to 1024); use 512 or 1024",
		MaxFlowEntries * 2: "limit",
	} {
		err := checkFlowEntries(n)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d: error %v, want %q", n, err, want)
		}
	}
}

func TestCheckModeOptions(t *testing.T) {
	online, err := cpuset.Online()
	if err != nil {
		t.Skip(err)
	}
	o := Options{Mode: ModeRPS}
	if err := checkModeOptions(&o); err != nil {
		t.Fatal(err)
	}
	if cpuset.Format(o.RPSCPUs) != cpuset.Format(online) || o.FlowEntries != 0 {
		t.Errorf("rps defaults: rps_cpus %v, flow entries %d; want all online CPUs %v and none", o.RPSCPUs, o.FlowEntries, online)
	}
	o = Options{Mode: ModeRFS, RPSOptions: RPSOptions{ContainerLevel: true}}
	if err := checkModeOptions(&o); err != nil {
		t.Fatal(err)
	}
	// The study's RFS sets the flow tables only; rps_cpus stays as it is.
	if o.RPSCPUs != nil || o.FlowEntries != DefaultFlowEntries {
		t.Errorf("rfs defaults: rps_cpus %v, flow entries %d; want none and %d", o.RPSCPUs, o.FlowEntries, DefaultFlowEntries)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Mode: ModeFalcon, RPSOptions: RPSOptions{ContainerLevel: true}}, "[--container-level]: only for --mode rps or rfs, not falcon"},
		{Options{Mode: ModeFalcon, RPSOptions: RPSOptions{RPSCPUs: []int{0}}}, "--rps-cpus"},
		{Options{Mode: ModeFalcon, RPSOptions: RPSOptions{FlowEntries: 64}}, "--flow-entries"},
		{Options{Mode: ModeRPS, RPSOptions: RPSOptions{FlowEntries: 64}}, "use --mode rfs"},
		{Options{Mode: ModeRFS, RPSOptions: RPSOptions{FlowEntries: 3}}, "not a power of two"},
		{Options{Mode: ModeRPS, RPSOptions: RPSOptions{RPSCPUs: []int{}}}, "empty CPU list"},
		{Options{Mode: ModeRFS, SplitOptions: SplitOptions{Split: true}}, "--split"},
	} {
		err := checkModeOptions(&c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
}

// guest: in the guest's list since it began; it needs no kernel, so it could leave
func TestStaticModes(t *testing.T) {
	if !IsStatic(ModeRPS) || !IsStatic(ModeRFS) || IsStatic(ModeFalcon) || IsStatic("warp") {
		t.Errorf("IsStatic: rps %v, rfs %v, falcon %v, warp %v", IsStatic(ModeRPS), IsStatic(ModeRFS), IsStatic(ModeFalcon), IsStatic("warp"))
	}
}
