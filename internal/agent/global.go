package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/journal"
)

// Kernel-wide values (rps_sock_flow_entries) are shared by every agent on
// the kernel, whatever namespace or state root it has: agents for several
// host namespaces (testbeds, benches) each ask for RFS, and the first to
// stop must not switch it off under the others. So they are held, not
// journaled per agent: the first holder records the old value (before
// writing the new one), later ones join, and the last one to let go
// restores it. The record sits in one fixed place for the whole kernel,
// under DefaultStateRoot, which the DaemonSet mounts from the node: in a
// pod's own /run it would be neither writable nor outlive the pod. Keys
// (ns-DEV-INODE) never name these files.
var (
	globalFile = filepath.Join(DefaultStateRoot, "global.json")
	globalLock = filepath.Join(DefaultStateRoot, "global.lock")
)

// WrittenPaths are where the agent writes on the node, besides the
// namespaces' sysfs and /proc/sys values: its state and journal, the
// kernel-wide holds, its pins. The DaemonSet mounts each from the node,
// writable, and the systemd unit lets the agent write there and nowhere
// else (deploy/).
func WrittenPaths() []string {
	return []string{DefaultStateRoot, globalFile, globalLock, DefaultPinRoot}
}

type globalHold struct {
	Path    string   `json:"path"`
	Old     string   `json:"old"`
	Value   string   `json:"value"`
	Holders []string `json:"holders"` // agents' state directories
}

// holdGlobal sets path (in the agent's own, initial namespace) to value for
// the agent whose state is in dir, or joins the agents that hold it at that
// value already. Another value than theirs is an error: one of them would
// silently not get what it asked for.
func holdGlobal(dir, path, value string) error {
	return withGlobal(func(hs *[]globalHold, save func() error) error {
		i := slices.IndexFunc(*hs, func(g globalHold) bool { return g.Path == path })
		if i < 0 {
			old, err := journal.Read("", path)
			if err != nil {
				return err
			}
			*hs = append(*hs, globalHold{Path: path, Old: old, Value: value})
			i = len(*hs) - 1
		}
		g := &(*hs)[i]
		g.Holders = slices.DeleteFunc(g.Holders, gone)
		if len(g.Holders) > 0 && g.Value != value && !slices.Contains(g.Holders, dir) {
			return fmt.Errorf("%s is %s for another falcon agent (state in %s); ask for the same value, or disable that agent first",
				path, g.Value, g.Holders[0])
		}
		g.Value = value
		if !slices.Contains(g.Holders, dir) {
			g.Holders = append(g.Holders, dir)
		}
		// The old value is on disk before the new one is written.
		if err := save(); err != nil {
			return err
		}
		return journal.Write("", path, value)
	})
}

// releaseGlobal lets go of what the agent whose state is in dir holds, and
// restores each value no agent holds any more. A holder whose state
// directory is gone (removed by hand, a test's temporary directory) holds
// nothing.
func releaseGlobal(dir string) error {
	if _, err := os.Stat(globalFile); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return withGlobal(func(hs *[]globalHold, save func() error) error {
		var errs []error
		var keep []globalHold
		for _, g := range *hs {
			var holders []string
			for _, h := range g.Holders {
				if h != dir && !gone(h) {
					holders = append(holders, h)
				}
			}
			g.Holders = holders
			if len(holders) == 0 {
				err := journal.Write("", g.Path, g.Old)
				if err == nil {
					continue
				}
				if errors.Is(err, journal.ErrRefused) { // a planted or edited file: never again
					errs = append(errs, fmt.Errorf("%s: %w: refused, left as it is, and dropped", globalFile, err))
					continue
				}
				errs = append(errs, fmt.Errorf("restore %s to %s: %w", g.Path, g.Old, err))
			}
			keep = append(keep, g)
		}
		*hs = keep
		errs = append(errs, save())
		return errors.Join(errs...)
	})
}

func gone(dir string) bool {
	_, err := os.Stat(dir)
	return errors.Is(err, os.ErrNotExist)
}

// withGlobal runs fn with the holds, under a lock that every falcon process
// on the machine takes; save writes them (and removes the files once none
// is left).
func withGlobal(fn func(hs *[]globalHold, save func() error) error) error {
	l, err := lockFileAt(globalLock, unix.LOCK_EX)
	if err != nil {
		return fmt.Errorf("lock %s: %w", globalLock, err)
	}
	defer l.Close() // closing drops the lock
	var hs []globalHold
	b, err := os.ReadFile(globalFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if hs, err = parseHolds(b); err != nil {
			return err
		}
	}
	save := func() error {
		if len(hs) == 0 {
			os.Remove(globalFile)
			os.Remove(globalLock) // under the lock: see lockFileAt
			return nil
		}
		return fileutil.WriteJSON(globalFile, hs, 0o600)
	}
	return fn(&hs, save)
}

// parseHolds reads the holds file's content. Its paths are checked where
// they are written (journal.Write): one that is no value falcon changes is
// refused there, by name.
func parseHolds(b []byte) ([]globalHold, error) {
	var hs []globalHold
	if err := json.Unmarshal(b, &hs); err != nil {
		return nil, fmt.Errorf("%s is corrupt (%v): restore its values by hand and remove it", globalFile, err)
	}
	return hs, nil
}
