package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/falconnet/falcon/internal/journal"
	"github.com/falconnet/falcon/internal/netns"
)

// Apply sets a static mode (rps, rfs) on opts.Netns once and returns,
// leaving no process behind: the values and the journal of what they were
// stay in the state directory, status reports them, and Disable restores
// them. Everything is checked before anything changes, and a failure
// half-way restores what was set. Applying the same settings again keeps
// the journal (so Disable still returns to the values before the first
// Apply) and sets the devices that came since, such as new containers';
// other settings, or a killed agent's leftovers, are undone first.
func Apply(opts Options) (*State, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if !IsStatic(opts.Mode) {
		return nil, fmt.Errorf("mode %s needs a running agent ('falcon enable' starts one)", opts.Mode)
	}
	h, mode, ov, err := newHost(opts)
	if err != nil {
		return nil, err
	}

	// From here on the system changes.
	sweepOrphans(opts, h.Key, h.Log())
	if h.lock, err = tryLock(h.Dir); err != nil {
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("falcon is %w in network namespace %s by a running agent; run 'falcon disable%s' first",
				ErrRunning, netns.Label(opts.Netns), NetnsFlag(opts.Netns))
		}
		return nil, fmt.Errorf("state directory %s: %w", h.Dir, err)
	}
	defer h.lock.release()
	started := time.Now()
	prev, _ := readState(h.Dir)
	if prev != nil && prev.Static && prev.Ready && sameSettings(prev.Options, opts) {
		started = prev.Started
	} else if err := cleanupDead(h.Dir, h.PinDir, opts.log()); err != nil {
		return nil, fmt.Errorf("undoing the settings there before: %w", err)
	}
	if h.journal, err = journal.Open(filepath.Join(h.Dir, journalFile)); err != nil {
		return nil, err
	}
	h.state = State{NetnsCookie: nsCookie(opts.Netns), Options: opts, Started: started, Devices: ov.Devices, Static: true}
	if err := h.update(func(*State) {}); err != nil {
		return nil, fmt.Errorf("write state: %w", err)
	}
	undo := func(cause error) (*State, error) {
		if rerr := errors.Join(h.journal.Restore(), releaseGlobal(h.Dir)); rerr != nil {
			return nil, fmt.Errorf("%w; restoring the values set so far failed too: %v (run 'falcon disable%s')", cause, rerr, NetnsFlag(opts.Netns))
		}
		removeState(h.Dir)
		removeRoots(opts)
		return nil, fmt.Errorf("%w (every value set was restored)", cause)
	}
	if err := mode.Start(h, ov); err != nil {
		return undo(err)
	}
	// Containers that ended since an earlier Apply took their values along.
	if err := h.journal.Prune(); err != nil {
		return undo(err)
	}
	if err := h.update(func(s *State) { s.Ready = true }); err != nil {
		return undo(fmt.Errorf("write state: %w", err))
	}
	h.Log().Info("falcon enabled: values set, 'falcon disable"+NetnsFlag(opts.Netns)+"' restores them", "mode", opts.Mode, "netns", netns.Label(opts.Netns))
	st := h.state
	return &st, nil
}
