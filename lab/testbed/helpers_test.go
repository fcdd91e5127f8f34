package testbed

import (
	"context"
	"fmt"
	"github.com/falconnet/falcon/lab/hostpaths"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func needRoot(t *testing.T) {
	t.Helper()
	roottest.Need(t)
	if err := CheckSystem(); err != nil {
		t.Skip(err)
	}
}

// needDaemons skips a test of a layout that cannot be built here (flannel-daemon without its daemons built).
func needDaemons(t *testing.T, layout string) {
	t.Helper()
	if err := CheckLayout(layout); err != nil {
		t.Skip(err)
	}
}

// tbName is unique per test process; tests add their own suffix.
func tbName(suffix string) string { return fmt.Sprintf("t%d-%s", os.Getpid(), suffix) }

// up builds a testbed that is removed when the test ends, also on failure.
func up(t *testing.T, s Spec) *Testbed {
	t.Helper()
	t.Cleanup(func() { Down(s.Name) })
	tb, err := Up(context.Background(), s)
	if err != nil {
		t.Fatalf("Up(%+v): %v", s, err)
	}
	return tb
}

// assertGone fails if any namespace or the state file of name remains.
func assertGone(t *testing.T, name string) {
	t.Helper()
	left, err := owned(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	for _, p := range []string{statePath(name), daemonDir(name)} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
	if m, _ := filepath.Glob(filepath.Join("/run/netns", Prefix+name+"-*")); len(m) > 0 {
		t.Errorf("namespaces left behind: %v", m)
	}
}

// inNS returns a command run inside namespace ns, a name or a path (a
// Docker sandbox's: entered without a sysfs of its own).
func inNS(ns string, args ...string) *exec.Cmd {
	if strings.Contains(ns, "/") {
		return exec.Command("nsenter", append([]string{"--net=" + ns}, args...)...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// crashAndDown kills the daemons of bases and loses the state file, as a
// crash or a killed 'up' leaves a testbed, and checks that Down still
// removes it all: no namespace, no file, none of pids running.
func crashAndDown(t *testing.T, name string, bases []string, pids []int) {
	t.Helper()
	for _, b := range bases {
		if pid, ok := daemonPID(b); ok {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err := os.Remove(statePath(name)); err != nil {
		t.Fatal(err)
	}
	if err := Down(name); err != nil {
		t.Fatal(err)
	}
	assertGone(t, name)
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil && !hostpaths.Gone(pid) {
			t.Errorf("pid %d still runs", pid)
		}
	}
}
