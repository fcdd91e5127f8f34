package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A --netns that is a FIFO (whose open would wait for a writer) or a device
// is refused at once by every command that takes one, with a message that
// says it is no network namespace.
func TestNetnsNotANamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds falcon")
	}
	bin := buildFalcon(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{fifo, "/dev/null"} {
		for _, cmd := range []string{"enable", "agent", "disable", "status", "doctor"} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			out, code := runCtx(ctx, t, bin, cmd, "--netns", ns)
			took := time.Since(start)
			cancel()
			if code == 0 || !strings.Contains(out, "is not a network namespace") {
				t.Errorf("falcon %s --netns %s: exit %d, %q; want it refused", cmd, ns, code, out)
			}
			if took > time.Second {
				t.Errorf("falcon %s --netns %s took %v", cmd, ns, took.Round(time.Millisecond))
			}
		}
	}
}
