package netns

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every name of one namespace has one ID: "" and /proc/self/ns/net (and
// /proc/1/ns/net where the test runs in PID 1's namespace), NAME and
// /run/netns/NAME.
func TestIdentifyAliases(t *testing.T) {
	name := testNS(t)
	same := func(a, b string) {
		t.Helper()
		ia, err := Identify(a)
		if err != nil {
			t.Fatal(err)
		}
		ib, err := Identify(b)
		if err != nil {
			t.Fatal(err)
		}
		if ia != ib {
			t.Errorf("%q is %+v, %q is %+v: one namespace, two identities", a, ia, b, ib)
		}
	}
	same("", "/proc/self/ns/net")
	same(name, filepath.Join(Dir, name))
	same(name, "/run/../run/netns/"+name)
	if init, err := Identify("/proc/1/ns/net"); err == nil && init == mustIdentify(t, "") {
		same("", "/proc/1/ns/net")
	}
	if a, b := mustIdentify(t, ""), mustIdentify(t, name); a == b {
		t.Errorf("two namespaces, one identity %+v", a)
	}
}

func mustIdentify(t *testing.T, name string) ID {
	t.Helper()
	id, err := Identify(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A --netns that is no network namespace is refused at once, however it
// would behave when opened: a FIFO (which an open blocks on until a writer
// comes), a device, a file, a directory, a link out of procfs, another
// kind of namespace.
func TestOpenRefusesWhatIsNoNetns(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/proc/self/ns/net", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/null", "/dev/zero", file, dir, link, "/proc/self/ns/mnt", "/proc/self/ns/user", ".."} {
		done := make(chan error, 1)
		go func() {
			f, err := Open(p)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("Open(%q) succeeded", p)
			} else if !strings.Contains(err.Error(), "network namespace") {
				t.Errorf("Open(%q): %v; want it to say it is no network namespace", p, err)
			}
		case <-time.After(time.Second):
			t.Fatalf("Open(%q) blocked for 1 s", p)
		}
		if err := Check(p); err == nil {
			t.Errorf("Check(%q) succeeded", p)
		}
		if _, err := Identify(p); err == nil {
			t.Errorf("Identify(%q) succeeded", p)
		}
	}
	for _, p := range []string{"", "/proc/self/ns/net", "/proc/thread-self/ns/net"} {
		if err := Check(p); err != nil {
			t.Errorf("Check(%q): %v", p, err)
		}
	}
}

// An error quotes a short prefix of a long name, not all of it.
func TestQuoteBounded(t *testing.T) {
	err := Check(strings.Repeat("x", 100_000))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("Check of a 100 KB name: %d bytes of error", len(err.Error()))
	}
}

// A name deleted and made again names another namespace: the stamps must
// tell them apart, and a stamp must agree with itself and with another
// name of the same namespace.
func TestStampTellsRecreatedName(t *testing.T) {
	name := testNS(t)
	old, err := StampOf(name)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := StampOf(Path(name)); err != nil || !again.Same(old) {
		t.Fatalf("the same namespace by its path: %+v, %v; want %+v", again, err, old)
	}
	host, err := StampOf("")
	if err != nil || host.Same(old) {
		t.Fatalf("the host's stamp %+v (%v) agrees with %s's %+v", host, err, name, old)
	}
	for _, args := range [][]string{{"del", name}, {"add", name}} {
		if out, err := exec.Command("ip", append([]string{"netns"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip netns %v: %v: %s", args, err, out)
		}
	}
	now, err := StampOf(name)
	if err != nil {
		t.Fatal(err)
	}
	if now.Same(old) {
		t.Fatalf("the re-made namespace's stamp %+v agrees with the first's %+v", now, old)
	}
}
