package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/policy"
)

// Files in an agent's state directory (/run/falcon/<key>/).
const (
	stateFile   = "state.json"
	journalFile = "journal.json"
	lockFile    = "lock"
	LogFile     = "agent.log"
)

// State is what a running agent tells other processes (status, disable).
type State struct {
	Pid int `json:"pid"`
	// NetnsCookie is the namespace's cookie (netns.Cookie; 0 where the
	// kernel has none): the key names it by device and inode, and the
	// kernel hands a gone namespace's inode to the next one it makes.
	NetnsCookie uint64            `json:"netns_cookie,omitempty"`
	Options     Options           `json:"options"`
	PinDir      string            `json:"pin_dir,omitempty"`
	Hooks       []datapath.Hook   `json:"hooks,omitempty"` // attached, or about to be
	Started     time.Time         `json:"started"`
	Ready       bool              `json:"ready"`
	Devices     []discover.Device `json:"devices,omitempty"` // the overlay as last seen
	// Static: a mode that only sets values (rps, rfs) was applied by
	// Apply, and no agent runs; the journal holds what to restore.
	Static bool `json:"static,omitempty"`
	// Values are what the rps and rfs modes set, as last applied.
	Values []Value `json:"values,omitempty"`
	// Engagement is the adaptive policy's engagement so far.
	Engagement *Engagement `json:"engagement,omitempty"`
	// FastpathWhy: why the fast path does not run (fastpath=auto, on a
	// layout or kernel it cannot serve).
	FastpathWhy string `json:"fastpath_why,omitempty"`
}

// Engagement is the engagement policy's part of the state
// (internal/policy), so that status can say why falcon is on or off the
// path.
type Engagement = policy.Engagement

// Value is one sysfs or procfs value a mode set. Netns is the device's
// namespace as discovery names it; a global value (Device "") lives in the
// agent's own, initial namespace.
type Value struct {
	Netns  string `json:"netns,omitempty"`
	Device string `json:"device,omitempty"`
	Role   string `json:"role,omitempty"`
	Path   string `json:"path"`
	Value  string `json:"value"`
}

func readState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}

// lock is the agent's claim on a host namespace: an exclusive flock held
// for the agent's life. The kernel drops it when the agent dies, however it
// dies, so a free lock with state left behind means a killed agent.
type lock struct{ f *os.File }

var errLocked = errors.New("locked")

func tryLock(dir string) (*lock, error) {
	f, err := lockFileAt(filepath.Join(dir, lockFile), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return nil, errLocked
	}
	if err != nil {
		return nil, err
	}
	return &lock{f}, nil
}

// lockFileAt takes path's flock (how: LOCK_EX, with or without LOCK_NB),
// making the file and its directory when missing. Lock files go once they
// guard nothing: an agent's state directory, lock and all, goes with the
// agent (removeState), the holds' lock with the last hold. Another process
// may remove the file, or its directory, between this one's open and flock;
// a lock taken on a removed file guards nothing, so it tries again.
func lockFileAt(path string, how int) (*os.File, error) {
	for tries := 0; ; tries++ {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if errors.Is(err, os.ErrNotExist) && tries < lockTries {
			continue // the directory went between MkdirAll and open
		}
		if err != nil {
			return nil, err
		}
		if f, err := lockOpened(f, path, how); f != nil || err != nil {
			return f, err
		}
		if tries >= lockTries {
			return nil, fmt.Errorf("lock %s: removed under each of %d tries", path, lockTries)
		}
	}
}

// lockOpened flocks f, opened at path, and answers nil, nil when the answer
// is no answer and the caller should open path again: f was removed from
// path, so a lock on it guards nothing, and "locked" on it means only that
// an exiting agent, which unlinks its lock file while holding it, had not
// closed it yet.
func lockOpened(f *os.File, path string, how int) (*os.File, error) {
	err := unix.Flock(int(f.Fd()), how)
	var held, now unix.Stat_t
	atPath := unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &now) == nil &&
		held.Ino == now.Ino && held.Dev == now.Dev
	switch {
	case err == nil && atPath:
		return f, nil
	case err == nil || (!atPath && errors.Is(err, unix.EWOULDBLOCK)):
		f.Close()
		return nil, nil
	}
	f.Close()
	return nil, err
}

// lockTries bounds lockFileAt's retries: each is one remover's race, and a
// remover acts once per agent's life.
const lockTries = 100

func (l *lock) release() {
	if l != nil && l.f != nil {
		unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}

// lockHolder is the pid that holds dir's lock as /proc/locks shows it
// (N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF), 0 when none is seen:
// no holder, or one in a PID namespace that this one does not see.
func lockHolder(dir string) int {
	var st unix.Stat_t
	if unix.Stat(filepath.Join(dir, lockFile), &st) != nil {
		return 0
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == file {
			if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
				return pid
			}
		}
	}
	return 0
}

// running reports whether an agent holds dir's lock. It only probes: it
// makes nothing, so that a status racing an agent's exit cannot leave a
// lock file (or the directory) behind the agent that removed them.
func running(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer f.Close() // closing drops the probe's own lock
	return errors.Is(unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// Running returns the state of the agent that runs for opts.Netns, or nil
// when none runs (a killed agent's leftovers are not running).
func Running(opts Options) (*State, error) {
	key, err := Key(opts.Netns)
	if err != nil {
		return nil, err
	}
	dir := opts.stateDir(key)
	if !running(dir) {
		return nil, nil
	}
	st, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return &State{}, nil // starting: no state written yet
	}
	return st, err
}

// StateDir is where the agent of opts.Netns keeps its state and log.
func StateDir(opts Options) (string, error) {
	key, err := Key(opts.Netns)
	if err != nil {
		return "", err
	}
	return opts.stateDir(key), nil
}

// PinDir is where the agent of opts.Netns pins its maps.
func PinDir(opts Options) (string, error) {
	key, err := Key(opts.Netns)
	if err != nil {
		return "", err
	}
	return opts.pinDir(key), nil
}
