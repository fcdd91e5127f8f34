package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/journal"
	"github.com/falconnet/falcon/internal/netns"
)

// ErrRunning is wrapped by Start's error when an agent already runs for the
// namespace.
var ErrRunning = errors.New("already enabled")

// Host is an agent's hold on one host namespace, as modes see it.
type Host struct {
	Opts   Options
	Key    string // names the namespace in paths
	Dir    string // state directory
	PinDir string // bpffs directory for the datapath's maps

	journal *journal.Journal
	lock    *lock
	mu      sync.Mutex
	state   State
}

// Log is the agent's log. It gets one line per decision that matters
// (enabled, stepped aside, a container followed), never one per packet.
func (h *Host) Log() *slog.Logger { return h.Opts.log() }

// Apply changes sysfs/procfs values in namespace ns through the journal, so
// that Disable restores them even after a crash.
func (h *Host) Apply(ns string, changes []journal.Change) error { return h.journal.Apply(ns, changes) }

// ApplyFunc is Apply with the changes computed inside namespace ns, where
// /sys shows its devices (see RPSChanges).
func (h *Host) ApplyFunc(ns string, fn func() ([]journal.Change, error)) error {
	return h.journal.ApplyFunc(ns, fn)
}

// AddHooks records hooks in the state file before they are attached, so
// that a Disable after a crash knows where to look.
func (h *Host) AddHooks(hooks ...datapath.Hook) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range hooks {
		if !slices.Contains(h.state.Hooks, n) {
			h.state.Hooks = append(h.state.Hooks, n)
		}
	}
	return h.saveLocked()
}

// RemoveHooks forgets hooks after they were detached.
func (h *Host) RemoveHooks(hooks ...datapath.Hook) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state.Hooks = slices.DeleteFunc(h.state.Hooks, func(x datapath.Hook) bool { return slices.Contains(hooks, x) })
	return h.saveLocked()
}

func (h *Host) update(f func(s *State)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.state)
	return h.saveLocked()
}

func (h *Host) saveLocked() error {
	return fileutil.WriteJSON(filepath.Join(h.Dir, stateFile), h.state, 0o600)
}

// Agent is a running agent.
type Agent struct {
	host   *Host
	mode   Mode
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	err    error
}

// Start enables falcon (or opts.Mode) on opts.Netns and returns once it is
// fully working: settings validated, overlay found, values changed, the
// datapath attached and load sampling running. Everything is checked before
// anything on the system changes; on failure everything changed is undone.
// The agent follows the overlay until ctx ends or Stop is called; Stop
// undoes everything.
func Start(ctx context.Context, opts Options) (*Agent, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	h, mode, ov, err := newHost(opts)
	if err != nil {
		return nil, err
	}

	// From here on the system changes.
	sweepOrphans(opts, h.Key, h.Log())
	if h.lock, err = tryLock(h.Dir); err != nil {
		if errors.Is(err, errLocked) {
			pid := 0
			if st, err := readState(h.Dir); err == nil {
				pid = st.Pid
			}
			return nil, fmt.Errorf("falcon is %w in network namespace %s (agent pid %d); run 'falcon disable%s' first",
				ErrRunning, netns.Label(opts.Netns), pid, NetnsFlag(opts.Netns))
		}
		return nil, fmt.Errorf("state directory %s: %w", h.Dir, err)
	}
	// A previous agent may have been killed: undo what it left first. Its
	// programs, still attached and keeping every stage inline, stay until
	// this agent's replace them (falcon modes), so that no packet passes
	// unhooked meanwhile; RPS is restored at once.
	_, static := mode.(StaticMode)
	dead, err := undoDead(h.Dir, h.PinDir, opts.log(), !static)
	if err != nil {
		err = errors.Join(err, dead.remove(nil))
		h.lock.release()
		return nil, fmt.Errorf("cleaning up after a killed agent: %w", err)
	}
	if h.journal, err = journal.Open(filepath.Join(h.Dir, journalFile)); err != nil {
		h.lock.release()
		return nil, errors.Join(err, dead.remove(nil))
	}
	h.state = State{Pid: os.Getpid(), NetnsCookie: nsCookie(opts.Netns), Options: opts, PinDir: h.PinDir, Started: time.Now(), Devices: ov.Devices}
	if static {
		h.state.PinDir = "" // no BPF: nothing for status or cleanup to look for
	}
	if err := h.update(func(*State) {}); err != nil {
		h.lock.release()
		return nil, errors.Join(fmt.Errorf("write state: %w", err), dead.remove(nil))
	}
	a := &Agent{host: h, mode: mode, done: make(chan struct{})}
	if err := mode.Start(h, ov); err != nil {
		a.teardown()
		return nil, errors.Join(err, dead.remove(nil))
	}
	if err := dead.remove(h.state.Hooks); err != nil {
		a.teardown()
		return nil, err
	}
	if err := h.update(func(s *State) { s.Ready = true }); err != nil {
		a.teardown()
		return nil, fmt.Errorf("write state: %w", err)
	}
	if h.state.PinDir == "" {
		h.Log().Info("falcon enabled", "mode", opts.Mode, "netns", netns.Label(opts.Netns))
	} else {
		h.Log().Info("falcon enabled", "mode", opts.Mode, "netns", netns.Label(opts.Netns), "cpus", cpuset.Format(opts.CPUs),
			"threshold", opts.Threshold, "policy", opts.Policy)
	}
	wctx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	go a.follow(wctx)
	return a, nil
}

// Check validates opts and checks the system as Start does — the overlay
// is there, the kernel can run the mode — without changing anything. It
// fills in opts' defaults.
func Check(opts *Options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	key, err := Key(opts.Netns)
	if err != nil {
		return err
	}
	_, _, err = check(&Host{Opts: *opts, Key: key, Dir: opts.stateDir(key), PinDir: opts.pinDir(key)})
	return err
}

// newHost checks opts against the system (see check), logging what
// discovery warns about, and returns the host they describe.
func newHost(opts Options) (*Host, Mode, *discover.Overlay, error) {
	key, err := Key(opts.Netns)
	if err != nil {
		return nil, nil, nil, err
	}
	h := &Host{Opts: opts, Key: key, Dir: opts.stateDir(key), PinDir: opts.pinDir(key)}
	mode, ov, err := check(h)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, w := range ov.Warnings {
		h.Log().Warn("overlay", "warning", w)
	}
	return h, mode, ov, nil
}

func check(h *Host) (Mode, *discover.Overlay, error) {
	impl, _ := lookupMode(h.Opts.Mode)
	ov, err := discoverOverlay(h.Opts)
	if err != nil {
		return nil, nil, err
	}
	mode := impl.new()
	if err := mode.Check(h, ov); err != nil {
		return nil, nil, err
	}
	return mode, ov, nil
}

func discoverOverlay(opts Options) (*discover.Overlay, error) {
	ov, err := discover.Discover(opts.Netns)
	if hostOnly(err, opts) {
		ov, err = &discover.Overlay{Netns: opts.Netns}, nil
	}
	if err != nil {
		return nil, err
	}
	return selectDevices(ov, opts)
}

// hostOnly says whether discovery's err is that there is no overlay where
// host NICs are named: they need none.
func hostOnly(err error, opts Options) bool {
	return errors.Is(err, discover.ErrNoOverlay) && len(opts.HostNICs) > 0
}

// selectDevices narrows what discovery found to the devices named
// (--devices) and adds the host NICs (--host-nics).
func selectDevices(ov *discover.Overlay, opts Options) (*discover.Overlay, error) {
	sel, err := discover.Select(ov, opts.Devices)
	if err != nil {
		return nil, err
	}
	return discover.AddHostNICs(sel, opts.HostNICs)
}

// follow keeps the mode in step with the overlay until ctx ends.
func (a *Agent) follow(ctx context.Context) {
	defer close(a.done)
	h := a.host
	var (
		mu      sync.Mutex
		latest  *discover.Overlay
		lastErr string
	)
	kick := make(chan struct{}, 1)
	gone := make(chan struct{})
	go func() {
		discover.Watch(ctx, h.Opts.Netns, func(e discover.Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Type == discover.Gone {
				// Nothing is left to follow: stop, so that an agent whose
				// namespace was deleted neither runs on nor keeps it alive.
				h.Log().Warn("stopping: the namespace went", "err", e.Err)
				close(gone)
				return
			}
			if e.Type == discover.Failed && hostOnly(e.Err, h.Opts) {
				e.Type, e.Overlay = discover.Added, &discover.Overlay{Netns: h.Opts.Netns} // what comes next: the host NICs
			}
			if e.Type == discover.Failed {
				if msg := e.Err.Error(); msg != lastErr {
					h.Log().Warn("overlay discovery failed", "err", msg)
					lastErr = msg
				}
				return
			}
			lastErr = ""
			latest = e.Overlay
			select {
			case kick <- struct{}{}:
			default:
			}
		})
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-gone:
			return
		case <-kick:
		}
		mu.Lock()
		ov := latest
		mu.Unlock()
		sel, err := selectDevices(ov, h.Opts)
		if err != nil {
			h.Log().Warn("overlay selection failed", "err", err)
			continue
		}
		if err := a.mode.Update(h, sel); err != nil {
			h.Log().Warn("following the overlay", "err", err)
		}
		h.update(func(s *State) { s.Devices = sel.Devices })
	}
}

// Wait blocks until the agent stops following the overlay (its context
// ended), and returns what Stop returns.
func (a *Agent) Wait() error {
	<-a.done
	return a.Stop()
}

// Stop undoes everything the agent did and releases the namespace. It may
// be called more than once.
func (a *Agent) Stop() error {
	a.once.Do(func() {
		if a.cancel != nil {
			a.cancel()
			<-a.done
		}
		a.err = a.teardown()
	})
	return a.err
}

// Ready reports whether the agent's mode is fully working.
func (a *Agent) Ready() bool { return a.mode.Ready() }

// Host returns the agent's view of its namespace.
func (a *Agent) Host() *Host { return a.host }

func (a *Agent) teardown() error {
	h := a.host
	errs := []error{a.mode.Stop(h)}
	if err := h.journal.Restore(); err != nil {
		errs = append(errs, fmt.Errorf("restore values: %w", err))
	}
	if err := releaseGlobal(h.Dir); err != nil {
		errs = append(errs, fmt.Errorf("restore kernel-wide values: %w", err))
	}
	err := errors.Join(errs...)
	if err == nil {
		removeState(h.Dir)
		removeRoots(h.Opts)
		h.Log().Info("falcon disabled: every changed value restored", "netns", netns.Label(h.Opts.Netns))
	} else {
		// Keep the state: 'falcon disable' retries what is left.
		h.update(func(s *State) { s.Ready = false; s.Pid = 0 })
	}
	h.lock.release()
	return err
}

// removeState removes the state directory, log included, and anything a
// killed agent left half-written there.
func removeState(dir string) { os.RemoveAll(dir) }

// removeRoots removes falcon's state and pin roots once no agent uses them.
func removeRoots(o Options) {
	os.Remove(o.stateRoot())
	os.Remove(o.pinRoot())
}

// Run is Start, then following the overlay until ctx ends, then Stop:
// falcon agent.
func Run(ctx context.Context, opts Options, ready func(*Agent)) error {
	a, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(a)
	}
	return a.Wait()
}

// NetnsFlag is the --netns flag that names ns on a falcon command line;
// "" for the current namespace.
func NetnsFlag(ns string) string {
	if ns == "" {
		return ""
	}
	return " --netns " + ns
}
