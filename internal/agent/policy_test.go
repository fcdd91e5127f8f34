package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/policy"
)

// busyPolicy is a test's engagement policy, to show what adding one takes:
// a type with Turn and Done, and one Register line. It steers while some
// CPU is busy and stands down once none is.
type busyPolicy struct{ p policy.Params }

func (b *busyPolicy) Turn(w policy.Window) policy.Verdict {
	busy := slices.ContainsFunc(w.Load, func(l uint32) bool { return l >= uint32(b.p.Threshold) })
	switch {
	case busy && (w.StoodDown || !w.Engaged):
		return policy.Verdict{Action: policy.Engage, Why: "a CPU is busy"}
	case !busy && !w.StoodDown:
		return policy.Verdict{Action: policy.Disengage, Why: "no CPU busy"}
	}
	return policy.Verdict{}
}

func (b *busyPolicy) Done(policy.Verdict, error) {}

// recordingMode is the falcon mode as the engine sees it, recording what
// it was told, on and off the path as told.
type recordingMode struct {
	down, engaged bool
	did           []string
}

func (r *recordingMode) SetLoad([]uint32, uint32, uint64) error { return nil }
func (r *recordingMode) Steer(on bool) error {
	r.engaged = on
	r.did = append(r.did, fmt.Sprintf("steer %v", on))
	return nil
}
func (r *recordingMode) StandDown(string) bool {
	r.down = true
	r.did = append(r.did, "stand down")
	return true
}
func (r *recordingMode) StandUp(string) error {
	r.down = false
	r.did = append(r.did, "stand up")
	return nil
}
func (r *recordingMode) Path() (bool, bool)                  { return r.down, r.engaged }
func (r *recordingMode) Netns() []string                     { return nil }
func (r *recordingMode) NICPackets() (map[int]uint64, error) { return nil, nil }

// TestRegisteredPolicy: a registered policy is a value of the policy
// setting, the datapath runs the per-packet choice it names, and the
// agent's engine drives it through the actuator from replayed loads.
func TestRegisteredPolicy(t *testing.T) {
	defer policy.Register(policy.Entry{Name: "test-busy", Datapath: datapath.PolicyAdaptive, Usage: "a test's",
		New: func(p policy.Params) policy.Policy { return &busyPolicy{p} }})()
	o := DefaultOptions()
	if err := ParseMode("falcon:policy=test-busy,cpus=0-1", &o); err != nil {
		t.Fatal(err)
	}
	if err := ParseMode("falcon:policy=nosuch", &o); err == nil || !strings.Contains(err.Error(), "test-busy") {
		t.Errorf("an unknown policy: %v, want the registered ones named", err)
	}
	h := &Host{Opts: o, Dir: t.TempDir()}
	m := &falconMode{}
	if cfg := m.config(h, &discover.Overlay{}); cfg.Policy != datapath.PolicyAdaptive {
		t.Errorf("the datapath's choice is %q, want %q", cfg.Policy, datapath.PolicyAdaptive)
	}
	rec := &recordingMode{down: true}
	e, err := m.engine(h, rec)
	if err != nil {
		t.Fatal(err)
	}
	if e.Always() {
		t.Error("a policy that takes turns is always on")
	}
	now := time.Unix(1000, 0)
	for _, load := range [][]uint32{{10, 10}, {95, 10}, {95, 10}, {20, 10}, {20, 10}} {
		now = now.Add(150 * time.Millisecond)
		e.Turn(t.Context(), policy.Window{At: now, Load: load, StoodDown: rec.down, Engaged: rec.engaged})
	}
	if want := []string{"stand up", "steer true", "steer false", "stand down"}; !slices.Equal(rec.did, want) {
		t.Errorf("did %q, want %q", rec.did, want)
	}
}
