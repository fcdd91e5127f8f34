package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// TestDaemonLayoutsCLI drives the real Flannel (flanneld, etcd, the CNI
// plugins) and the real Docker swarm through the binaries as a user does:
// falcon-lab testbed up, falcon doctor, enable, status, disable, and
// falcon-lab testbed down; then a 'testbed up' killed once its daemons
// run, and the down after it, which must leave no namespace, process or
// file.
func TestDaemonLayoutsCLI(t *testing.T) {
	bin := cliBinary(t)
	for _, l := range []struct {
		layout, short string
		// what doctor finds by role: Docker adds its ingress network
		// (an overlay, a bridge, a veth to ingress_sbox) and the
		// network's load balancer endpoint (a veth to lb_...).
		roles map[string]int
		// a file that shows the daemons run and pods or containers are
		// being made
		running string
	}{
		{"flannel-daemon", "fd", map[string]int{"nic": 1, "overlay": 1, "bridge": 1, "host-veth": 2, "container": 2}, "h2/flanneld.pid"},
		{"docker-swarm", "sw", map[string]int{"nic": 1, "overlay": 2, "bridge": 2, "host-veth": 4, "container": 4}, "h1/docker/data/containers/*"},
	} {
		t.Run(l.layout, func(t *testing.T) {
			if err := testbed.CheckLayout(l.layout); err != nil {
				t.Skip(err)
			}
			lab := labtest.Build(t, "cmd/falcon-lab")
			daemonLayoutCLI(t, bin, lab, l.layout, fmt.Sprintf("cli%d-%s", os.Getpid(), l.short), l.roles, l.running)
		})
	}
}

func daemonLayoutCLI(t *testing.T, bin, lab, layout, name string, wantRoles map[string]int, running string) {
	t.Cleanup(func() { testbed.Down(name) })
	out, code := falcon(t, lab, "testbed", "up", "--layout", layout, "--name", name, "--containers", "2", "--json")
	var tb testbed.Testbed
	if err := json.Unmarshal([]byte(out), &tb); code != 0 || err != nil {
		t.Fatalf("testbed up: exit %d, %v\n%s", code, err, out)
	}
	h := tb.Hosts[1]

	out, code = falcon(t, bin, "doctor", "--netns", h.Netns, "--json")
	var rep struct {
		Overlay  struct{ Devices []struct{ Name, Role string } }
		Findings []struct{ Check, Severity, Device, Message string }
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("doctor: exit %d, %v\n%s", code, err, out)
	}
	roles := map[string]int{}
	for _, d := range rep.Overlay.Devices {
		roles[d.Role]++
	}
	if !maps.Equal(roles, wantRoles) {
		t.Errorf("doctor found devices %v, want %v", roles, wantRoles)
	}
	for _, f := range rep.Findings {
		if f.Severity == "warn" || f.Severity == "error" {
			t.Errorf("doctor on the daemons' own overlay: %s %s %s: %s", f.Severity, f.Check, f.Device, f.Message)
		}
	}

	c := h.Containers[0]
	vx0, ct0 := rps(t, h.OverlayNS(), h.Overlay), rps(t, c.Netns, c.Dev)
	// Policy paper: attached from enable (adaptive starts off the path),
	// so status shows the hooks on the daemons' own overlay.
	if out, code := falcon(t, bin, "enable", "--netns", h.Netns, "--policy", "paper"); code != 0 {
		t.Fatalf("enable: exit %d\n%s", code, out)
	}
	if out, code := falcon(t, bin, "status", "--netns", h.Netns, "--ready"); code != 0 {
		t.Errorf("status --ready: exit %d\n%s", code, out)
	}
	checkDaemonStatus(t, bin, h, wantRoles)
	if out, code := falcon(t, bin, "disable", "--netns", h.Netns); code != 0 {
		t.Errorf("disable: exit %d\n%s", code, out)
	}
	if rps(t, h.OverlayNS(), h.Overlay) != vx0 || rps(t, c.Netns, c.Dev) != ct0 {
		t.Error("disable did not restore RPS")
	}
	if out, code := falcon(t, lab, "testbed", "down", "--name", name); code != 0 {
		t.Fatalf("testbed down: exit %d\n%s", code, out)
	}
	noDaemonTrace(t, name)

	// A 'testbed up' killed once its daemons run leaves them and their
	// pods; down removes them all the same.
	killed := name + "-k"
	t.Cleanup(func() { testbed.Down(killed) })
	up := exec.Command(lab, "testbed", "up", "--layout", layout, "--name", killed, "--containers", "2")
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	pattern := filepath.Join(testbed.StateDir, killed+".d", running)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			break
		}
	}
	up.Process.Kill()
	up.Wait()
	if len(procsMentioning(t, killed+".d")) == 0 {
		t.Errorf("no daemon of the killed up runs: the kill came too late to test anything")
	}
	if out, code := falcon(t, lab, "testbed", "down", "--name", killed); code != 0 {
		t.Fatalf("testbed down after a killed up: exit %d\n%s", code, out)
	}
	noDaemonTrace(t, killed)
}

// noDaemonTrace fails unless testbed name left no namespace, no daemon
// process and no file.
func noDaemonTrace(t *testing.T, name string) {
	t.Helper()
	if l := labtest.TestbedLeft(t, name); len(l) > 0 {
		t.Errorf("namespaces left: %v", l)
	}
	if p := procsMentioning(t, name+".d"); len(p) > 0 {
		t.Errorf("processes left: %v", p)
	}
	for _, p := range []string{filepath.Join(testbed.StateDir, name+".d"), filepath.Join(testbed.StateDir, name+".json")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left", p)
		}
	}
}

// procsMentioning lists the live processes whose command line contains s
// (a testbed's daemons name its state directory).
func procsMentioning(t *testing.T, s string) []string {
	t.Helper()
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), s) {
			found = append(found, strings.ReplaceAll(strings.TrimSpace(string(b)), "\x00", " "))
		}
	}
	return found
}

// checkDaemonStatus: steering's stages on the daemons' own overlay, and the
// default mode's fast path where it fits: swarm's veths are out of its
// reach, so steering runs alone there, and status says why.
func checkDaemonStatus(t *testing.T, bin string, h testbed.Host, wantRoles map[string]int) {
	t.Helper()
	r := statusJSON(t, bin, h.Netns)
	if !r.Enabled || len(r.Stages) != 1+wantRoles["overlay"] || r.Stages[0].Device != h.NIC || r.Stages[0].Steers != h.Overlay {
		t.Errorf("status: %+v", r)
	}
	if swarm := h.OverlayNS() != h.Netns; swarm != strings.Contains(r.FastpathWhy, "cannot reach") {
		t.Errorf("fast path not running because %q (overlay in its own namespace: %v)", r.FastpathWhy, swarm)
	}
}
