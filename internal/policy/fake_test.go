package policy

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
)

// fakeMode records what the engine did, in order, and is on or off the
// path as told.
type fakeMode struct {
	down, engaged bool
	did           []string
	saved         *Engagement
	loads         atomic.Int32 // samples published
}

func (f *fakeMode) SetLoad([]uint32, uint32, uint64) error { f.loads.Add(1); return nil }
func (f *fakeMode) Steer(on bool) error {
	f.engaged = on
	f.did = append(f.did, fmt.Sprintf("steer %v", on))
	return nil
}
func (f *fakeMode) StandDown(why string) bool {
	f.down = true
	f.did = append(f.did, "stand down")
	return true
}
func (f *fakeMode) StandUp(why string) error {
	f.down = false
	f.did = append(f.did, "stand up")
	return nil
}
func (f *fakeMode) Path() (bool, bool)                  { return f.down, f.engaged }
func (f *fakeMode) Netns() []string                     { return nil }
func (f *fakeMode) NICPackets() (map[int]uint64, error) { return nil, nil }

// params are a policy's, saving into f.
func (f *fakeMode) params(cpus ...int) Params {
	return Params{Threshold: 85, CPUs: cpus, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Counters: &Counters{}, Causes: &Log{},
		Save: func(update func(*Engagement) *Engagement) error { f.saved = update(f.saved); return nil }}
}
