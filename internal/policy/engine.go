package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/falconnet/falcon/internal/loadavg"
)

// Engine runs a policy: it samples the load for the datapath, reads a
// window every engageWindow, asks the policy, and carries the verdict out
// through the mode.
type Engine struct {
	p        Params
	interval time.Duration
	entry    Entry
	pol      Policy
	mode     Mode
	// last: the sampler's latest; targets: while engaged by cause, the only
	// CPUs the datapath may steer to (the load it sees is masked).
	last    atomic.Pointer[loadavg.Sample]
	targets atomic.Pointer[[]int]
	reader  causeReader
	// probing: the A/B test switches: each hook's attach is no news.
	probing atomic.Bool
	// noSockDiag: the kernel gave no TCP socket statistics, so the A/B
	// test scores TCP by segments (delivered.go).
	noSockDiag atomic.Bool
	running    atomic.Bool
	// wake ends the sampler's parked sleep; published counts its samples
	// (Fresh).
	wake      chan struct{}
	published atomic.Uint64
	cancel    context.CancelFunc
	done      chan error
	bg        sync.WaitGroup
}

// Config is what an engine runs with.
type Config struct {
	Params
	Policy   string        // a registered policy's name
	Interval time.Duration // how often the load is sampled
}

// DefaultInterval is how often the load is sampled by default.
const DefaultInterval = loadavg.DefaultInterval

// New makes the engine of the registered policy c.Policy ("": Default)
// for mode.
func New(c Config, mode Mode) (*Engine, error) {
	e, ok := Lookup(cmp.Or(c.Policy, Default))
	if !ok {
		return nil, fmt.Errorf("policy %q: want %s", c.Policy, Choices())
	}
	return &Engine{p: c.Params, interval: c.Interval, entry: e, pol: e.New(c.Params), mode: mode}, nil
}

// Always: the policy keeps falcon on the path and takes no turns.
func (e *Engine) Always() bool { return e.entry.Always }

// Probing: an A/B test is switching the path.
func (e *Engine) Probing() bool { return e.probing.Load() }

// Running: the sampler runs (it stops only at Stop or on an error), or,
// where the policy will never come on the path, the engine until Stop.
func (e *Engine) Running() bool { return e.running.Load() }

// Sample feeds the datapath with load and returns after the first sample
// is published, so that the programs never start on stale load. Its
// context, which Stop ends, is for Run. A policy that knows, once
// started, that it will never come on the path has no use for load: no
// sampler runs then. Its ten samples a second were half an idle agent's
// wake-ups on 2 vCPUs, spent on CPUs it could not relieve
// (results/fastpath-2cpu-vm/agent-idle/).
func (e *Engine) Sample() (context.Context, error) {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	if e.Never() != "" {
		e.running.Store(true)
		go func() {
			<-ctx.Done()
			e.running.Store(false)
			e.done <- nil
		}()
		return ctx, nil
	}
	first := make(chan struct{})
	e.wake = make(chan struct{}, 1)
	s := &loadavg.Sampler{CPUs: e.p.CPUs, Interval: e.interval, RealTime: true, Wake: e.wake,
		QuietBelow: quietBelow(e.p.Threshold), MaxInterval: MaxSampleGap(e.interval), Publish: func(smp loadavg.Sample) error {
			load := smp.PerCPU
			if t := e.targets.Load(); t != nil {
				load = maskLoad(load, *t)
			}
			if err := e.mode.SetLoad(load, smp.Avg, smp.MonotonicNs); err != nil {
				return err
			}
			e.last.Store(&smp)
			e.published.Add(1)
			if e.running.CompareAndSwap(false, true) {
				close(first)
			}
			return nil
		}}
	s.Warn = func(err error) { e.p.Log.Warn("load sampler", "err", err) }
	s.Resting = func() bool { down, _ := e.mode.Path(); return down }
	go func() {
		err := s.Run(ctx)
		e.running.Store(false)
		if err != nil {
			e.p.Log.Error("load sampler stopped: steering is off until the agent restarts", "err", err)
		}
		e.done <- err
	}()
	select {
	case <-first:
		return ctx, nil
	case err := <-e.done:
		e.done <- err
		if err == nil {
			err = errors.New("stopped")
		}
		return nil, fmt.Errorf("load sampler: %w", err)
	case <-time.After(5*e.interval + 2*time.Second):
		return nil, errors.New("load sampler published nothing")
	}
}

// Fresh has the sampler take a sample now, ending a parked sleep, and
// waits up to timeout for it to be published; false if none came. The
// sampler parks only while falcon stands down, and a parked sleep can end
// a second late under saturation (loadavg.Sampler.Wake): a comeback starts
// on fresh load and the sampler on its cadence.
func (e *Engine) Fresh(timeout time.Duration) bool {
	if !e.running.Load() {
		return false
	}
	n := e.published.Load()
	select {
	case e.wake <- struct{}{}:
	default: // one is pending already
	}
	for end := time.Now().Add(timeout); e.published.Load() == n; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// Start settles what the policy settles before its first turn (falcon
// stood down); Run then takes the turns until ctx ends.
func (e *Engine) Start() error {
	if s, ok := e.pol.(Starter); ok && !e.entry.Always {
		return s.Start()
	}
	return nil
}

// Never says why the policy knows, once started, that falcon will never
// come on the path; "" where it may, and for a policy that is always on
// it.
func (e *Engine) Never() string {
	if n, ok := e.pol.(Never); ok && !e.entry.Always {
		return n.Never()
	}
	return ""
}

// Run takes a turn every engageWindow until ctx ends; it returns at once
// for a policy that takes none, or knows it will never come on the path.
func (e *Engine) Run(ctx context.Context) {
	if e.entry.Always || e.Never() != "" {
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(engageWindow):
			}
			w, ok := e.read()
			if ok {
				e.Turn(ctx, w)
			}
		}
	}()
}

// Stop ends the sampler and the turns.
func (e *Engine) Stop() {
	if e.cancel != nil {
		e.cancel()
		<-e.done
		e.bg.Wait()
		e.cancel = nil
	}
}

// read takes the turn's window; false where the policy reads the causes
// and this was the first reading, which only starts the window.
func (e *Engine) read() (Window, bool) {
	w := Window{At: time.Now()}
	if e.entry.Causes {
		cw, ok := e.reader.read(e.mode)
		if !ok {
			return w, false
		}
		w.Cause = &cw
	}
	w.At = time.Now()
	w.StoodDown, w.Engaged = e.mode.Path()
	if smp := e.last.Load(); smp != nil {
		w.Load = smp.PerCPU
	}
	return w, true
}

// Turn asks the policy about w and carries its verdict out: a replay
// drives the engine through here.
func (e *Engine) Turn(ctx context.Context, w Window) {
	v := e.pol.Turn(w)
	if v.Action == Measure {
		t, ok := e.pol.(Tester)
		if !ok {
			return
		}
		v = t.Judge(e.test(ctx))
	}
	e.pol.Done(v, e.apply(v))
}

// apply carries a verdict out: targets first, so that an engagement steers
// only to them from its first packet.
func (e *Engine) apply(v Verdict) error {
	if v.Aim {
		if v.Targets == nil {
			e.targets.Store(nil)
		} else {
			t := slices.Clone(v.Targets)
			e.targets.Store(&t)
		}
	}
	var err error
	switch v.Action {
	case Engage:
		if err = e.onPath(true, v.Why); err != nil && v.Aim {
			e.targets.Store(nil)
		}
	case Disengage:
		err = e.onPath(false, v.Why)
	case StandDown:
		if !e.mode.StandDown(v.Why) {
			err = errors.New("still on the path")
		}
	}
	return err
}

// onPath puts falcon on the path and steering (on), or takes it off the
// path, stood down, every flow drained back inline first.
func (e *Engine) onPath(on bool, why string) error {
	if !on {
		if err := e.mode.Steer(false); err != nil {
			e.p.Log.Warn("engagement", "err", err)
			return err
		}
		if !e.mode.StandDown(why) {
			return errors.New("still on the path")
		}
		return nil
	}
	if err := e.mode.StandUp(why); err != nil {
		return err
	}
	if err := e.mode.Steer(true); err != nil {
		e.p.Log.Warn("engagement", "err", err)
		return err
	}
	return nil
}

// Probe runs one A/B test and judges it, whatever the policy: for a test
// of what its switches do to the flows.
func (e *Engine) Probe(ctx context.Context) (on, ok bool) { return judge(e.p, e.test(ctx)) }

// quietMargin: while no CPU is within it of the threshold, the sampler
// slows down to MaxSampleGap: no choice can change until one gets there,
// and the next sample after it does comes within that gap.
const quietMargin = 15

func quietBelow(threshold int) uint32 { return uint32(max(1, threshold-quietMargin)) }

// MaxSampleGap: how far apart a quiet sampler's samples are.
func MaxSampleGap(interval time.Duration) time.Duration { return 10 * interval }

// Apply carries a verdict out as a turn does, without asking the policy:
// for a test of the switches.
func (e *Engine) Apply(v Verdict) error { return e.apply(v) }

// Targets: while engaged by cause, the only CPUs the datapath may steer
// to; nil where any CPU of the set may take a stage.
func (e *Engine) Targets() []int {
	if t := e.targets.Load(); t != nil {
		return *t
	}
	return nil
}
