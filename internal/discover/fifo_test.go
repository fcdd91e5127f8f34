package discover

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO where runtimes bind-mount namespaces (anyone who can write to
// /run/netns can leave one) would block every open of it for good: the
// discovery opens nothing that is no namespace file, finds the overlay in
// bounded time, and says it skipped the FIFO and why.
func TestFIFOInNetnsDir(t *testing.T) {
	l := newLab(t, "f")
	l.sh(`ip -n {h} link add ovl0 type vxlan id 100 remote 192.168.77.2 dstport 4789
ip -n {h} link set ovl0 up`)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "planted")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	saved := nsDirs
	nsDirs = append(slices.Clone(nsDirs), dir)
	t.Cleanup(func() { nsDirs = saved })

	type result struct {
		o   *Overlay
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := Discover(l.ns("h"))
		done <- result{o, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		// A writer's open completes the reader's that waits: let the
		// discovery go before failing.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatalf("Discover still runs after 20 s: it waits on the FIFO %s", fifo)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.o.Role(RoleOverlay)) != 1 {
		t.Errorf("overlay devices %+v, want ovl0", r.o.Role(RoleOverlay))
	}
	said := slices.ContainsFunc(r.o.Warnings, func(w string) bool {
		return strings.Contains(w, fifo+" skipped") && strings.Contains(w, "not a network namespace")
	})
	if !said {
		t.Errorf("warnings %q: want %s skipped, as not a network namespace", r.o.Warnings, fifo)
	}
}
