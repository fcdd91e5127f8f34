package agent

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				removeState(dir)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < 2000; i++ {
		l, err := tryLock(dir)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		running(dir)
		l.release()
	}
}
