package agent

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A probe makes nothing: a status that races an agent's exit must not
// leave a lock file, or the directory, behind it.
func TestRunningMakesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns-1-2")
	if running(dir) {
		t.Error("running on a directory that does not exist")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the probe made %s (%v)", dir, err)
	}
	l, err := tryLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !running(dir) {
		t.Error("a held lock is not seen as running")
	}
	l.release()
	if running(dir) {
		t.Error("a released lock is seen as running")
	}
}

// An agent removes its state directory, lock file and all, as it exits,
// while a disable may be locking it to clean up after it: the lock is
// taken, never "no such file", and never on a file that was removed.
// (It once failed TestMetricsAndTopUnderTraffic's disable with
// "open /run/falcon/ns-…/lock: no such file or directory".)
func TestLockBesideARemover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns-1-2")
	for i := 0; i < 2000; i++ {
		// One removal per round, as an agent removes its directory once
		// in its life, landing anywhere in the locker's open-flock-stat;
		// a remover that never pauses wins a hundred rounds in a row on
		// two CPUs and tests only the scheduler.
		removed := make(chan struct{})
		go func() {
			defer close(removed)
			for spin := rand.IntN(20000); spin > 0; spin-- {
			}
			removeState(dir)
		}()
		l, err := tryLock(dir)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		running(dir)
		l.release()
		<-removed
	}
}

// TestLockedOnARemovedFile: a flock that meets an exiting agent's lock on
// a file already unlinked from the path is no answer: the caller opens the
// path again rather than reporting another agent.
func TestLockedOnARemovedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), lockFile)
	holder, err := lockFileAt(path, unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil { // the exiting agent's removeState
		t.Fatal(err)
	}
	if got, err := lockOpened(f, path, unix.LOCK_EX|unix.LOCK_NB); got != nil || err != nil {
		t.Fatalf("lock on a removed file held by another: got %v, %v; want no answer", got, err)
	}
	again, err := lockFileAt(path, unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		t.Fatalf("the path's new file: %v", err)
	}
	again.Close()
	if f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
		t.Fatal(err)
	}
	holder2, err := lockFileAt(path, unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	defer holder2.Close()
	if _, err := lockOpened(f, path, unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("lock held on the file at the path: %v, want EWOULDBLOCK", err)
	}
}
