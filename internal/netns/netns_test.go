package netns

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// testNS creates a uniquely named namespace with a device of its own, removed
// when the test ends.
func testNS(t *testing.T) string {
	t.Helper()
	roottest.Need(t)
	name := fmt.Sprintf("fct-netns-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	// A veth pair rather than a dummy device: dummy is a module this
	// kernel may lack, veth the testbed needs anyway.
	if out, err := exec.Command("ip", "-n", name, "link", "add", "fctdummy0", "type", "veth", "peer", "name", "fctdummy1").CombinedOutput(); err != nil {
		t.Fatalf("create a veth pair in %s: %v: %s", name, err, out)
	}
	return name
}

func TestPath(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "/run/netns/a", "/proc/1/ns/net": "/proc/1/ns/net"} {
		if got := Path(in); got != want {
			t.Errorf("Path(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckMissing(t *testing.T) {
	if err := Check("fct-does-not-exist"); err == nil {
		t.Fatal("Check of a missing namespace succeeded")
	}
}

func TestWithSysfsSeesOnlyThatNamespace(t *testing.T) {
	name := testNS(t)
	err := WithSysfs(name, func(root string) error {
		if _, err := os.Stat(filepath.Join(root, "class/net/fctdummy0")); err != nil {
			return fmt.Errorf("device of the namespace not visible: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The mount must not have leaked into this thread's view.
	if _, err := os.Stat("/sys/class/net/fctdummy0"); err == nil {
		t.Fatal("namespace sysfs leaked into the caller's /sys")
	}
}

func TestDoAndReadProcNet(t *testing.T) {
	name := testNS(t)
	dev, err := ReadProcNet(name, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(dev, []byte("fctdummy0")) {
		t.Fatalf("/proc/net/dev of %s lacks its device:\n%s", name, dev)
	}
	// thread-self, not self: self is the main thread, which an earlier
	// WithSysfs may have wedged in its namespace (see WithSysfs).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(own, []byte("fctdummy0")) {
		t.Fatal("caller left in the test namespace")
	}
}

func TestInode(t *testing.T) {
	runtime.LockOSThread() // "" is this thread's namespace
	defer runtime.UnlockOSThread()
	self, err := Inode("")
	if err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("net:[%d]", self); link != want {
		t.Errorf("Inode(\"\") = %d, /proc says %s", self, link)
	}
	if _, err := Inode("fct-does-not-exist"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Inode of a missing namespace: %v, want a not-exist error", err)
	}

	name := testNS(t)
	other, err := Inode(name)
	if err != nil {
		t.Fatal(err)
	}
	if other == self {
		t.Fatalf("namespace %s has the caller's inode %d", name, self)
	}
	var inside uint64
	if err := Do(name, func() (err error) { inside, err = Inode(""); return err }); err != nil {
		t.Fatal(err)
	}
	if inside != other {
		t.Errorf("Inode(\"\") inside %s = %d, Inode(%q) = %d", name, inside, name, other)
	}
}

func TestLabel(t *testing.T) {
	for name, want := range map[string]string{"": "host", "fb-x-h1": "fb-x-h1", "/proc/1/ns/net": "/proc/1/ns/net"} {
		if got := Label(name); got != want {
			t.Errorf("Label(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestNoThreadLeftInside: WithSysfs throws its thread away afterwards,
// which the runtime cannot do with the main thread; that thread must never
// be the one left inside (it would keep the namespace alive for the
// process's life). The main goroutine waits meanwhile, so the main thread
// is free to run the work, as in an agent blocked in Wait.
func TestNoThreadLeftInside(t *testing.T) {
	ns := testNS(t)
	ino, err := Inode(ns)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if err := WithSysfs(ns, func(string) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := Do(ns, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if c := Cookie(); c == 0 {
		t.Log("this kernel has no namespace cookies (SO_NETNS_COOKIE, 5.14)")
	}
	deadline := time.Now().Add(5 * time.Second) // threads take a moment to exit
	for {
		var inside []string
		tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
		for _, p := range tasks {
			if got, err := Inode(p); err == nil && got == ino {
				inside = append(inside, p)
			}
		}
		if len(inside) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads still inside %s (pid %d): %v", ns, os.Getpid(), inside)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Lines of /proc/self/mountinfo recorded here with two Docker daemons
// running (their own --exec-root each) and a named namespace; a space in a
// path is escaped by the kernel.
const recordedMountinfo = `44 42 0:4 net:[4026532177] /run/netns/swx1 rw shared:2 - nsfs nsfs rw
27 1 0:26 / /tmp rw,relatime shared:5 - tmpfs tmpfs rw
50 27 0:4 net:[4026532386] /tmp/swx/h1/exec/netns/1-30ot13hwai rw - nsfs nsfs rw
51 27 0:4 mnt:[4026532462] /tmp/swx/h2/mnt rw - nsfs nsfs rw
52 27 0:4 net:[4026532531] /tmp/swx/h2\040x/exec/netns/1-30ot13hwai rw - nsfs nsfs rw
`

func TestMounts(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(f, []byte(recordedMountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	got := mounts(f)
	want := []string{"/run/netns/swx1", "/tmp/swx/h1/exec/netns/1-30ot13hwai", "/tmp/swx/h2 x/exec/netns/1-30ot13hwai"}
	if !slices.Equal(got, want) {
		t.Fatalf("mounts = %q, want %q", got, want)
	}
}
