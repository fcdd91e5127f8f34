package agent

import (
	"context"
	"errors"
	"fmt"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/falconnet/falcon/internal/netns"
)

// Two names of one namespace are one key, so one lock: a second agent is
// refused however it names the namespace.
func TestKeyAliasesShareOneLock(t *testing.T) {
	roottest.Need(t)
	name := fmt.Sprintf("fct-key-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	o := DefaultOptions()
	o.StateRoot = t.TempDir()
	for _, names := range [][2]string{{name, filepath.Join(netns.Dir, name)}, {"", "/proc/self/ns/net"}, {"", "/proc/thread-self/ns/net"}} {
		a, b := o, o
		a.Netns, b.Netns = names[0], names[1]
		da, err := StateDir(a)
		if err != nil {
			t.Fatal(err)
		}
		db, err := StateDir(b)
		if err != nil {
			t.Fatal(err)
		}
		if da != db {
			t.Errorf("%q keeps its state in %s, %q in %s", names[0], da, names[1], db)
		}
		l, err := tryLock(da)
		if err != nil {
			t.Fatal(err)
		}
		if l2, err := tryLock(db); !errors.Is(err, errLocked) {
			l2.release()
			t.Errorf("%q locked while %q holds the lock: %v", names[1], names[0], err)
		}
		l.release()
		if !sameNetns(names[0], names[1]) {
			t.Errorf("%q and %q: not the same namespace", names[0], names[1])
		}
	}
	if sameNetns("", name) {
		t.Errorf("%q and the current namespace: the same", name)
	}
}

// A --netns that is no namespace never reaches falcon's own directories:
// "testbeds" (the testbeds' state) names none, and disable removes nothing.
func TestKeyReservedNames(t *testing.T) {
	root := t.TempDir()
	keep := filepath.Join(root, "testbeds", "tb.json")
	if err := os.MkdirAll(filepath.Dir(keep), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"testbeds", ".", "..", "global.lock"} {
		o := DefaultOptions()
		o.Netns, o.StateRoot, o.PinRoot = ns, root, t.TempDir()
		if was, err := Disable(o); was || err == nil {
			t.Errorf("disable --netns %s: %v, %v; want an error", ns, was, err)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("disable --netns %s: %v", ns, err)
		}
	}
}

// Two agents for one namespace by two names: the second is refused, and
// the first runs on.
func TestStartRefusesAlias(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	o := testOptions(t, tb.Hosts[1].Netns)
	startAgent(context.Background(), t, o)
	alias := o
	alias.Netns = netns.Path(o.Netns)
	if b, err := Start(context.Background(), alias); !errors.Is(err, ErrRunning) {
		if err == nil {
			b.Stop()
		}
		t.Fatalf("Start as %s: %v, want ErrRunning", alias.Netns, err)
	}
	if r, err := Status(alias); err != nil || !r.Ready {
		t.Errorf("the first agent, seen as %s: %+v %v", alias.Netns, r, err)
	}
}

// The kernel's record of the lock names its holder, for when the state
// that would say it is unreadable.
func TestLockHolder(t *testing.T) {
	dir := t.TempDir()
	if pid := lockHolder(dir); pid != 0 {
		t.Errorf("no lock: holder %d", pid)
	}
	l, err := tryLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if pid := lockHolder(dir); pid != os.Getpid() {
		t.Errorf("lock held by this process (%d): holder %d", os.Getpid(), pid)
	}
}
