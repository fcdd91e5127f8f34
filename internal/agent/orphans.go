package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
)

// sweepOrphans removes what agents left for network namespaces that no
// longer exist: a killed agent's pins, which keep its programs loaded (and
// its tracepoint programs running on every CPU), and its state. Its
// journal is replayed as disable would; values inside the gone namespace
// went with it. A namespace that still exists is never touched, however
// dead its agent: that is 'falcon disable --netns' to decide. Enable and
// disable sweep, so a run that failed before its namespace went (a testbed
// removed under a killed agent) leaves nothing behind for long. own is
// the key the caller is about to handle itself.
func sweepOrphans(o Options, own string, log *slog.Logger) {
	if st, err := readState(o.stateDir(own)); err == nil && !running(o.stateDir(own)) && recycled(st, o.Netns) {
		if err := sweepOrphan(o, own); err != nil {
			log.Warn("leftovers of an agent whose network namespace is gone, and its inode reused by this one: not all removed", "key", own, "error", err)
		} else {
			log.Info("removed what an agent left for a network namespace that is gone, whose inode this one got", "key", own)
		}
	}
	keys := orphanCandidates(o, own)
	if len(keys) == 0 {
		return
	}
	live, err := netns.Live()
	if err != nil {
		log.Debug("leftovers of other namespaces' agents not swept", "error", err)
		return
	}
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return
	}
	for _, key := range keys {
		if id, _ := parseKey(key); id.Dev != self.Dev || live[id.Ino] {
			continue
		}
		if err := sweepOrphan(o, key); err != nil {
			log.Warn("leftovers of an agent whose network namespace is gone: not all removed", "key", key, "error", err)
		} else {
			log.Info("removed what an agent left for a network namespace that is gone", "key", key)
		}
	}
}

// orphanCandidates are the keys with state or pins but no running agent.
func orphanCandidates(o Options, own string) []string {
	var keys []string
	for _, root := range []string{o.stateRoot(), o.pinRoot()} {
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			k := e.Name()
			if _, ok := parseKey(k); ok && e.IsDir() && k != own && !slices.Contains(keys, k) && !running(o.stateDir(k)) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// sweepOrphan undoes one gone namespace's leftovers under its lock, so
// that an agent starting meanwhile on a namespace that got the same inode
// is never swept.
func sweepOrphan(o Options, key string) error {
	dir, pinDir := o.stateDir(key), o.pinDir(key)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return datapath.Cleanup(pinDir, nil)
	}
	l, err := tryLock(dir)
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer l.release()
	if err := cleanupDead(dir, pinDir, o.log()); err != nil {
		return err
	}
	removeState(dir)
	return nil
}

// recycled says whether st is of another namespace than name, one that is
// gone and whose inode name's namespace got (their keys are one): their
// cookies differ. Where the kernel has no cookie (before 5.14), or the
// state was written without one, it cannot be told and the state is taken
// for name's (docs/operations-security.md).
func recycled(st *State, name string) bool {
	if st.NetnsCookie == 0 {
		return false
	}
	now := nsCookie(name)
	return now != 0 && now != st.NetnsCookie
}

// nsCookie is namespace name's cookie, 0 where it cannot be told.
func nsCookie(name string) uint64 {
	s, _ := netns.StampOf(name)
	return s.Cookie
}
