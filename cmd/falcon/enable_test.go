package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// buildFalcon builds the real binary: enable starts 'falcon agent' from its
// own executable, which a test binary is not.
func buildFalcon(t *testing.T) string { return labtest.Build(t, "cmd/falcon") }

func TestMain(m *testing.M) {
	code := m.Run()
	labtest.RemoveBuilds()
	os.Exit(code)
}

// falcon runs the binary and returns its combined output and exit status.
// statusJSON is `falcon status --netns ns --json`, decoded.
func statusJSON(t *testing.T, bin, ns string) agent.Report {
	t.Helper()
	out, code := falcon(t, bin, "status", "--netns", ns, "--json")
	var r agent.Report
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	return r
}

func falcon(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("falcon %v: %v", args, err)
	return "", -1
}

func rps(t *testing.T, ns, dev string) string {
	t.Helper()
	var out []byte
	err := netns.WithSysfs(ns, func(root string) (err error) {
		out, err = os.ReadFile(filepath.Join(root, "class/net", dev, "queues/rx-0/rps_cpus"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// guest: the CLI end to end on the old kernel
func TestEnableStatusDisableCLI(t *testing.T) {
	bin, tb := cliTestbed(t, "e")
	h := tb.Hosts[1]
	c := h.Containers[0]
	t.Cleanup(func() { falcon(t, bin, "disable", "--netns", h.Netns) })
	stateDir := stateDirOf(t, h.Netns)
	vx0, ct0 := rps(t, h.Netns, h.Overlay), rps(t, c.Netns, "eth0")

	enableRejects(t, bin, h.Netns, stateDir, []rejected{
		{[]string{"--cpus", "4095"}, 1, "CPU 4095 does not exist"},
		{[]string{"--cpus", "1-"}, 2, "--cpus"},
		{[]string{"--threshold", "101"}, 2, "outside 0..100"},
		{[]string{"--order", "random"}, 2, "--order"},
		{[]string{"--interval", "soon"}, 2, "--interval"},
		{[]string{"--devices", "nosuchdev"}, 1, "nosuchdev"},
		{[]string{"--netns", "fct-no-such-netns"}, 1, "not found"},
		{[]string{"--netns", tb.Hosts[0].Containers[0].Netns}, 1, "no VXLAN overlay found"},
	})
	if rps(t, h.Netns, h.Overlay) != vx0 || rps(t, c.Netns, "eth0") != ct0 {
		t.Fatal("bad input changed RPS settings")
	}

	// Paper: the adaptive default stands down once no CPU has been busy
	// for a second, restoring RPS, and a slow machine (the 6.1 guest under
	// emulation) got there before the checks below.
	out, code := falcon(t, bin, "enable", "--netns", h.Netns, "--policy", "paper")
	if code != 0 || !strings.Contains(out, "agent pid") {
		t.Fatalf("enable: exit %d\n%s", code, out)
	}
	if out, code := falcon(t, bin, "status", "--netns", h.Netns, "--ready"); code != 0 {
		t.Errorf("status --ready: exit %d\n%s", code, out)
	}
	if out, code := falcon(t, bin, "status", "--netns", h.Netns, "--alive"); code != 0 || strings.TrimSpace(out) != "alive" {
		t.Errorf("status --alive: exit %d\n%s", code, out)
	}
	r := statusJSON(t, bin, h.Netns)
	if !r.Enabled || !r.Ready || len(r.Stages) != 2 || r.Stages[0].Device != h.NIC || r.Stages[0].Steers != h.Overlay {
		t.Errorf("status: %+v", r)
	}
	if got := rps(t, c.Netns, "eth0"); got != cpuset.Mask(mustOnline(t)) {
		t.Errorf("container rps_cpus %s while enabled", got)
	}
	if out, _ := falcon(t, bin, "enable", "--netns", h.Netns, "--policy", "paper"); !strings.Contains(out, "already enabled") {
		t.Errorf("second enable: %s", out)
	}
	if out, code := falcon(t, bin, "enable", "--netns", h.Netns, "--policy", "paper", "--threshold", "90"); code != 0 || !strings.Contains(out, "replacing") {
		t.Errorf("enable with new settings: exit %d\n%s", code, out)
	}
	out, _ = falcon(t, bin, "status", "--netns", h.Netns)
	if !strings.Contains(out, "threshold 90%") || !strings.Contains(out, ": ready") {
		t.Errorf("status after re-enable:\n%s", out)
	}
	checkAgentKept(t, bin, h.Netns)

	if out, code := falcon(t, bin, "disable", "--netns", h.Netns); code != 0 || !strings.Contains(out, "restored") {
		t.Errorf("disable: exit %d\n%s", code, out)
	}
	if out, code := falcon(t, bin, "status", "--netns", h.Netns, "--ready"); code != 1 || !strings.Contains(out, "not enabled") {
		t.Errorf("status --ready after disable: exit %d\n%s", code, out)
	}
	if out, code := falcon(t, bin, "status", "--netns", h.Netns, "--alive"); code != 1 || !strings.Contains(out, "not alive: falcon is not enabled") {
		t.Errorf("status --alive after disable: exit %d\n%s", code, out)
	}
	if rps(t, h.Netns, h.Overlay) != vx0 || rps(t, c.Netns, "eth0") != ct0 {
		t.Error("disable did not restore RPS settings")
	}
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("disable left %s", stateDir)
	}
	if out, _ := exec.Command("tc", "-n", h.Netns, "filter", "show", "dev", h.NIC, "ingress").CombinedOutput(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("filters left on %s: %s", h.NIC, out)
	}
}

// checkAgentKept: bad input leaves the running agent on ns alone; the
// namespace by another name is the same namespace, with the same agent.
func checkAgentKept(t *testing.T, bin, ns string) {
	t.Helper()
	pid := statusJSON(t, bin, ns).Pid
	for _, args := range [][]string{{"--mode", "mflow:elephant=NaN"}, {"--mode", "mflow:elephant=Inf"}, {"--mode", "falcon:cpus=" + strings.Repeat("x,", 1<<14)}, {"--mode", strings.Repeat("m", 100_000)}} {
		args = append([]string{"enable", "--netns", ns}, args...)
		if out, code := falcon(t, bin, args...); code != 2 || len(out) > 1000 {
			t.Errorf("falcon %.80q: exit %d, %.2000s; want a short usage error", args, code, out)
		}
	}
	alias := filepath.Join(netns.Dir, ns)
	if out, _ := falcon(t, bin, "enable", "--netns", alias, "--policy", "paper", "--threshold", "90"); !strings.Contains(out, "already enabled") {
		t.Errorf("enable --netns %s: %s", alias, out)
	}
	if r := statusJSON(t, bin, alias); r.Pid != pid || !r.Ready {
		t.Errorf("after bad input and an alias's enable: agent pid %d, ready %v; was pid %d", r.Pid, r.Ready, pid)
	}
}

// rejected is bad input to falcon enable: the exit code and the message
// it deserves.
type rejected struct {
	args []string
	code int
	msg  string
}

// enableRejects checks that enable refuses each bad input on ns as it
// deserves and leaves no state behind.
func enableRejects(t *testing.T, bin, ns, stateDir string, bad []rejected) {
	t.Helper()
	for _, bad := range bad {
		args := append([]string{"enable", "--netns", ns}, bad.args...)
		out, code := falcon(t, bin, args...)
		if code != bad.code || !strings.Contains(out, bad.msg) {
			t.Errorf("falcon %v: exit %d, %q; want exit %d and %q", args, code, out, bad.code, bad.msg)
		}
		if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("falcon %v left %s", args, stateDir)
		}
	}
}

// cliBinary skips unless a testbed with falcon on it can run here, then
// builds the binary.
func cliBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a testbed")
	}
	labtest.NeedTestbeds(t)
	if err := datapath.Supported(); err != nil {
		t.Skip(err)
	}
	return buildFalcon(t)
}

func mustOnline(t *testing.T) []int {
	cpus, err := cpuset.Online()
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}

// cliTestbed skips unless a testbed can run here, then builds the binary
// and brings up a one-container docker testbed named after tag, taken down
// when the test ends.
func cliTestbed(t *testing.T, tag string) (bin string, tb *testbed.Testbed) {
	t.Helper()
	bin = cliBinary(t)
	return bin, labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("cli%d%s", os.Getpid(), tag), Layout: "docker", Containers: 1})
}
