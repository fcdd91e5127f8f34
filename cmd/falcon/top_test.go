package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// rate matches a stage's packets/s in a frame, such as "vxlan0 12.3k".
var rate = regexp.MustCompile(`(nic eth0|vxlan0|containers) [0-9.]+[kMG]?`)

// topOnce runs falcon top --once on an agent under traffic.
func topOnce(t *testing.T, bin, ns string) {
	out, code := falcon(t, bin, "top", "--netns", ns, "--once", "--interval", "500ms")
	t.Logf("\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Error("--once wrote escape codes")
	}
	for _, want := range []string{"falcon top  netns " + ns, "cpu0 ", "cpu1 ", "decided", "fallback"} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks %q", want)
		}
	}
	if !rate.MatchString(out) {
		t.Error("no stage rate in the frame, under traffic")
	}
}

// topInTmux runs falcon top in a real terminal: tmux draws it, the test
// reads the screen and quits it with q, then again with Ctrl-C.
func topInTmux(t *testing.T, bin, ns string) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (scripts/setup.sh --test installs it): falcon top's terminal view is untested")
	}
	// A socket of the test's own: with -L, tmux would leave /tmp/tmux-UID.
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { tmux("kill-server") })
	for _, key := range []string{"q", "C-c"} {
		status := filepath.Join(t.TempDir(), "status")
		// The shell records top's exit status once the session's command ends.
		cmd := fmt.Sprintf("%s top --netns %s; echo $? > %s", bin, ns, status)
		if out, err := tmux("new-session", "-d", "-s", "top", "-x", "120", "-y", "40", cmd); err != nil {
			t.Fatalf("tmux new-session: %v\n%s", err, out)
		}
		var screen string
		deadline := time.Now().Add(15 * time.Second)
		for {
			screen, _ = tmux("capture-pane", "-p", "-t", "top")
			// The second frame has rates: wait for one.
			if strings.Contains(screen, "falcon top") && strings.Contains(screen, "cpu1") && rate.MatchString(screen) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no frame with rates on the screen after 15 s:\n%s", screen)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("screen:\n%s", strings.TrimRight(screen, "\n "))
		if out, err := tmux("send-keys", "-t", "top", key); err != nil {
			t.Fatalf("send-keys %s: %v\n%s", key, err, out)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if _, err := tmux("has-session", "-t", "top"); err != nil {
				break // the session ended with top
			}
			if time.Now().After(deadline) {
				screen, _ = tmux("capture-pane", "-p", "-t", "top")
				t.Fatalf("falcon top still runs 5 s after %s:\n%s", key, screen)
			}
		}
		if b, err := os.ReadFile(status); err != nil || strings.TrimSpace(string(b)) != "0" {
			t.Errorf("falcon top after %s: exit status %q (%v)", key, b, err)
		}
	}
}
