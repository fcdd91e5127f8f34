package sim

import (
	"math"
	"testing"
	"time"
)

// testCosts are round numbers for checking the model's mechanics, not
// measurements.
var testCosts = Costs{Size: 1000, Send: 2000, Build: 500, NIC: 1000, VXLAN: 700, Container: 800, ContainerDrop: 300, App: 1000, AppBusy: 600,
	HandoffTx: 200, HandoffRx: 300, Hook: 100, XDP: 150, SoftShare: 0.7}

func mode(t *testing.T, spec string) Mode {
	t.Helper()
	m, err := ParseMode(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func runT(t *testing.T, s Setup) Outcome {
	t.Helper()
	if s.Duration == 0 {
		s.Duration, s.Warmup = 200*time.Millisecond, 50*time.Millisecond
	}
	if s.Size == 0 {
		s.Size = 1000
	}
	o, err := Run(s, testCosts)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

func TestVanillaOneCore(t *testing.T) {
	c := testCosts
	o := runT(t, Setup{CPUs: 1, Place: Placement{Sender: []int{0}, Receiver: []int{0}, NIC: -1}, Mode: mode(t, "vanilla"), Flows: 1})
	want := 1e9 / (c.Send + c.Build + c.NIC + c.VXLAN + c.Container + c.App)
	if !near(o.PPS, want, 0.05) {
		t.Errorf("one core: %.0f pps, want %.0f (every cost in series)", o.PPS, want)
	}
}

func TestVanillaTwoCores(t *testing.T) {
	c := testCosts
	o := runT(t, Setup{CPUs: 2, Place: Placement{Sender: []int{0}, Receiver: []int{1}, NIC: -1}, Mode: mode(t, "vanilla"), Flows: 1})
	want := 1e9 / (c.Send + c.Build + c.NIC + c.VXLAN + c.Container)
	if !near(o.PPS, want, 0.05) {
		t.Errorf("two cores: %.0f pps, want %.0f (the sender's CPU runs the whole receive path)", o.PPS, want)
	}
	if o.Busy[0] < 95 || o.Reordered != 0 {
		t.Errorf("CPU 0 busy %.1f %%, reordered %d", o.Busy[0], o.Reordered)
	}
}

func TestOpenLoop(t *testing.T) {
	p := Placement{Sender: []int{0}, NIC: 1, Receiver: []int{2}, Falcon: []int{3}}
	below := runT(t, Setup{CPUs: 4, Place: p, Mode: mode(t, "vanilla"), Flows: 1, Rate: 200000})
	if !near(below.PPS, 200000, 0.05) || below.LossPct > 1 {
		t.Errorf("below capacity: %.0f pps, loss %.1f %%", below.PPS, below.LossPct)
	}
	c := testCosts
	capacity := 1e9 / (c.Build + c.NIC + c.VXLAN + c.Container)
	over := runT(t, Setup{CPUs: 4, Place: p, Mode: mode(t, "vanilla"), Flows: 1, Rate: 2 * capacity})
	if !near(over.PPS, capacity, 0.05) {
		t.Errorf("over capacity: %.0f pps, want the NIC CPU's %.0f", over.PPS, capacity)
	}
	if over.P99Us <= below.P99Us {
		t.Errorf("p99 %.1f us overloaded, %.1f us below: queues should grow", over.P99Us, below.P99Us)
	}
}

// With idle cores, falcon moves stages off the saturated NIC CPU and
// delivers more; with the guard, nothing is reordered.
func TestFalconUsesIdleCores(t *testing.T) {
	p := Placement{Sender: []int{0, 1}, NIC: 2, Receiver: []int{3, 4}, Falcon: []int{5, 6, 7}}
	base := Setup{CPUs: 8, Place: p, Flows: 4, Rate: 2e6}
	base.Mode = mode(t, "vanilla")
	v := runT(t, base)
	for _, spec := range []string{"falcon", "falcon:policy=paper", "falcon+split"} {
		s := base
		s.Mode = mode(t, spec)
		o := runT(t, s)
		if o.PPS < 1.2*v.PPS {
			t.Errorf("%s: %.0f pps, vanilla %.0f: idle cores unused (busy %v)", spec, o.PPS, v.PPS, o.Busy)
		}
		if o.Reordered != 0 {
			t.Errorf("%s: %d reordered", spec, o.Reordered)
		}
	}
}

func TestDeterministic(t *testing.T) {
	s := Setup{CPUs: 4, Place: Placement{Sender: []int{0}, NIC: 1, Receiver: []int{2}, Falcon: []int{3}}, Mode: mode(t, "falcon"), Flows: 3, Rate: 5e5, Seed: 7}
	a, b := runT(t, s), runT(t, s)
	if a.PPS != b.PPS || a.P99Us != b.P99Us {
		t.Errorf("same seed, different outcomes: %+v %+v", a, b)
	}
}

func TestSetupErrors(t *testing.T) {
	m := mode(t, "vanilla")
	ok := Setup{CPUs: 2, Place: Placement{Sender: []int{0}, Receiver: []int{1}, NIC: -1}, Mode: m, Flows: 1, Duration: time.Second}
	for name, f := range map[string]func(*Setup){
		"no cores":      func(s *Setup) { s.CPUs = 0 },
		"no flows":      func(s *Setup) { s.Flows = 0 },
		"cpu too high":  func(s *Setup) { s.Place.Receiver = []int{2} },
		"nothing sends": func(s *Setup) { s.Place.Sender = nil },
		"negative rate": func(s *Setup) { s.Rate = -1 },
	} {
		s := ok
		f(&s)
		if _, err := Run(s, testCosts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, spec := range []string{"mflow9", "mflow", "falcon+split:batch=64"} {
		if _, err := ParseMode(spec); err == nil {
			t.Errorf("mode %s accepted: the model has no micro-flows", spec)
		}
	}
}
