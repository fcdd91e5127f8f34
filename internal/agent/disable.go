package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/journal"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/quote"
)

// StopTimeout is how long Disable waits for a running agent to undo its
// changes after SIGTERM.
var StopTimeout = 30 * time.Second

// Disable stops the agent of opts.Netns and undoes everything it changed;
// after an agent that was killed it restores the journal, removes the
// datapath's filters and pins, and the state itself. It reports whether
// there was anything to disable.
func Disable(opts Options) (bool, error) {
	key, err := Key(opts.Netns)
	if err != nil {
		return false, err
	}
	sweepOrphans(opts, key, opts.log())
	dir, pinDir := opts.stateDir(key), opts.pinDir(key)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// Nothing recorded; pins alone would be a bug's leftovers.
		pins, _ := filepath.Glob(filepath.Join(pinDir, "falcon_*"))
		if len(pins) == 0 {
			// A name that is no namespace is a typo, not "nothing to do".
			return false, netns.Check(opts.Netns)
		}
		err := datapath.Cleanup(pinDir, nil)
		removeRoots(opts)
		return true, err
	}
	if running(dir) {
		if err := stopAgent(dir); err != nil {
			return true, err
		}
	}
	l, err := tryLock(dir)
	if err != nil {
		if errors.Is(err, errLocked) {
			return true, errors.New("another falcon agent took over the namespace meanwhile")
		}
		return true, err
	}
	defer l.release()
	if err := cleanupDead(dir, pinDir, opts.log()); err != nil {
		return true, err
	}
	removeState(dir)
	l.release()
	removeRoots(opts)
	return true, nil
}

// stopAgent sends SIGTERM to the agent that holds dir's lock and waits for
// it to let go.
func stopAgent(dir string) error {
	st, err := readState(dir)
	if err != nil {
		// The kernel knows who holds the lock, whatever the state says.
		if st = (&State{Pid: lockHolder(dir)}); st.Pid == 0 {
			return fmt.Errorf("an agent holds %s but its state is unreadable (%v); stop it by hand", dir, err)
		}
	}
	if st.Pid == os.Getpid() {
		return errors.New("the agent runs in this process: stop it with its Stop method")
	}
	if st.Pid <= 0 {
		return fmt.Errorf("an agent holds %s but recorded no pid; stop it by hand", dir)
	}
	if err := syscall.Kill(st.Pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop agent pid %d: %w (does it run in another PID namespace, e.g. a Kubernetes pod? stop it there)", st.Pid, err)
	}
	deadline := time.Now().Add(StopTimeout)
	for running(dir) {
		if time.Now().After(deadline) {
			return fmt.Errorf("agent pid %d did not stop within %v after SIGTERM; see %s", st.Pid, StopTimeout, filepath.Join(dir, LogFile))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// cleanupDead undoes what a dead agent left in dir: its BPF filters, tcx
// links and pins, and every value in its journal. It leaves the log and the
// lock (the caller holds it).
func cleanupDead(dir, pinDir string, log *slog.Logger) error {
	left, err := undoDead(dir, pinDir, log, false)
	return errors.Join(err, left.remove(nil))
}

// deadSuffix names the directory a dead agent's pins move to while a new
// agent takes over from them.
const deadSuffix = "-dead" // bpffs refuses names with a dot

// deadDatapath is a dead agent's datapath, its programs still attached
// (pinned links, or cls_bpf filters) and running on stale load: every
// stage inline.
type deadDatapath struct {
	pinDir string
	hooks  []datapath.Hook
}

// remove detaches what is left of d, except on the hooks in taken, where
// a new agent's programs have already replaced the dead one's.
func (d *deadDatapath) remove(taken []datapath.Hook) error {
	if d == nil {
		return nil
	}
	var hooks []datapath.Hook
	for _, h := range d.hooks {
		if !slices.ContainsFunc(taken, func(t datapath.Hook) bool { return t.SameAttachPoint(h) }) {
			hooks = append(hooks, h)
		}
	}
	if err := datapath.Cleanup(d.pinDir, hooks); err != nil {
		return fmt.Errorf("remove the dead agent's datapath: %w", err)
	}
	return nil
}

// undoDead restores every value a dead agent's journal holds. Its datapath
// is returned to be removed (deadDatapath.remove); with takeOver, its pins
// move aside first, to pinDir+deadSuffix, so that a new datapath can pin
// its own in pinDir and replace the dead one's programs hook by hook.
func undoDead(dir, pinDir string, log *slog.Logger, takeOver bool) (*deadDatapath, error) {
	st, err := readState(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		// The journal, not the state, holds the values to restore: a
		// state file that cannot be read must not keep them changed.
		log.Warn("the dead agent's state is unreadable: restoring the values its journal holds; lost with it: which devices "+
			"its programs were attached to, so a tc filter of falcon's (kernels without tcx) may stay attached, doing nothing", "error", err)
		st = nil
	}
	// A takeover that died halfway left these.
	if err := datapath.Cleanup(pinDir+deadSuffix, nil); err != nil {
		return nil, fmt.Errorf("remove an earlier dead datapath: %w", err)
	}
	jf := filepath.Join(dir, journalFile)
	_, jerr := os.Stat(jf)
	pins, _ := filepath.Glob(filepath.Join(pinDir, "falcon_*"))
	if st == nil && jerr != nil && len(pins) == 0 {
		return nil, nil
	}
	left := &deadDatapath{pinDir: pinDir}
	if st != nil {
		left.hooks = st.Hooks
		if st.PinDir != "" && st.PinDir != pinDir {
			// Only this namespace's own pin directory: a state that names
			// another path (edited, or corrupt) must not have it renamed
			// or emptied.
			log.Warn("the dead agent's state names a pin directory that is not its own: ignored", "pin_dir", quote.Short(st.PinDir), "own", pinDir)
		}
		switch {
		case st.Static:
			log.Info("restoring the values an earlier mode set", "mode", st.Options.Mode)
		case takeOver:
			log.Warn("taking over from an agent that did not stop cleanly", "pid", st.Pid)
		default:
			log.Warn("cleaning up after an agent that did not stop cleanly", "pid", st.Pid)
		}
	}
	if takeOver {
		if err := os.Rename(left.pinDir, left.pinDir+deadSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return left, fmt.Errorf("move the dead agent's pins aside: %w", err)
		}
		left.pinDir += deadSuffix
	}
	// The values first: the dead agent's programs still run, with its load
	// gone stale, so every stage runs inline (hash 0: RPS does nothing);
	// with RPS restored first, their detaching changes no packet's CPU.
	// The other way round, the kernel's RPS would spread the flows by
	// their own hash for a moment.
	var errs []error
	if err := journal.Restore(jf); err != nil {
		errs = append(errs, fmt.Errorf("restore values: %w", err))
	}
	if err := releaseGlobal(dir); err != nil {
		errs = append(errs, fmt.Errorf("restore kernel-wide values: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return left, err
	}
	os.Remove(filepath.Join(dir, stateFile))
	return left, nil
}
