package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/agent/agenttest"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// queueValue reads one attribute of a device's first receive queue.
func queueValue(t *testing.T, ns, dev, attr string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+dev+"/queues/rx-0/"+attr).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// studyDevs are the server host's devices the study configures: NIC,
// VXLAN device, host-side veths (host namespace), and the containers' eth0.
func studyDevs(h testbed.Host) (host []string, containers [][2]string) {
	host = []string{h.NIC, h.Overlay}
	for _, c := range h.Containers {
		host = append(host, c.HostVeth)
		containers = append(containers, [2]string{c.Netns, c.Dev})
	}
	return host, containers
}

// TestStaticModesCLI: 'falcon enable --mode rfs --container-level' sets the
// study's RFS+ values and leaves no process running, status lists them,
// disable restores them; 'falcon agent --mode rps' holds the study's RPS
// until SIGTERM and then restores; bad input changes nothing.
func TestStaticModesCLI(t *testing.T) {
	labtest.NeedTestbeds(t)
	if _, err := os.Stat(agent.SockFlowPath); err != nil {
		t.Skip(err)
	}
	bin := buildFalcon(t)
	tb := labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("cli%ds", os.Getpid()), Layout: "calico", Containers: 2})
	h := tb.Hosts[1]
	t.Cleanup(func() { falcon(t, bin, "disable", "--netns", h.Netns) })
	stateDir := stateDirOf(t, h.Netns)
	before := studyValues(t, h)

	enableRejects(t, bin, h.Netns, stateDir, []rejected{
		{[]string{"--mode", "rps", "--rps-cpus", "4095"}, 1, "--rps-cpus: CPU 4095 does not exist"},
		{[]string{"--mode", "rfs", "--rps-cpus", "0-4095"}, 1, "--rps-cpus: CPU 2"},
		{[]string{"--mode", "rps", "--rps-cpus", "x"}, 2, "--rps-cpus"},
		{[]string{"--mode", "rfs", "--flow-entries", "0"}, 2, "0 would switch RFS off"},
		{[]string{"--mode", "rfs", "--flow-entries", "1000"}, 1, "not a power of two"},
		{[]string{"--mode", "rps", "--flow-entries", "4096"}, 1, "use --mode rfs"},
		{[]string{"--mode", "falcon", "--container-level"}, 1, "only for --mode rps or rfs"},
		{[]string{"--container-level"}, 1, "only for --mode rps or rfs"},
		{[]string{"--mode", "rps9"}, 2, `unknown mode "rps9": want one of ` + strings.Join(agent.ModeNames(), ", ")},
		{[]string{"--mode", "rps:threshold=90"}, 2, `mode rps: unknown setting "threshold": want one of devices, container-level, rps-cpus`},
		{[]string{"--mode", "vanilla"}, 2, `unknown mode "vanilla"`},
		{[]string{"--mode", "rfs", "--netns", tb.Hosts[0].Containers[0].Netns}, 1, "no VXLAN overlay found"},
	})
	sameValues(t, "after bad input", before, studyValues(t, h))

	checkRFSPlus(t, bin, h, before)
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("disable left %s", stateDir)
	}

	// RPS in the foreground, as the DaemonSet runs it.
	cmd := exec.Command(bin, "agent", "--netns", h.Netns, "--mode", "rps", "--threshold=85", "--split=")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	waitAgentReady(t, bin, h.Netns, exited, &log)
	mask := cpuset.Mask(mustOnline(t))
	want := map[string]string{}
	for k, v := range before {
		want[k] = v
		if strings.HasSuffix(k, "rps_cpus") && strings.HasPrefix(k, h.Netns+" ") {
			want[k] = mask
		}
	}
	sameValues(t, "rps agent", want, studyValues(t, h))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("agent after SIGTERM: %v\n%s", err, log.String())
	}
	sameValues(t, "after SIGTERM", before, studyValues(t, h))
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("agent left %s", stateDir)
	}
}

// studyValues are the values the study's static modes set on h: the
// global flow table's size, and each device's rps_cpus and rps_flow_cnt.
func studyValues(t *testing.T, h testbed.Host) map[string]string {
	t.Helper()
	hostDevs, ctrs := studyDevs(h)
	m := map[string]string{"global": agenttest.SockFlowEntries(t)}
	for _, d := range hostDevs {
		for _, a := range []string{"rps_cpus", "rps_flow_cnt"} {
			m[h.Netns+" "+d+" "+a] = queueValue(t, h.Netns, d, a)
		}
	}
	for _, c := range ctrs {
		for _, a := range []string{"rps_cpus", "rps_flow_cnt"} {
			m[c[0]+" "+c[1]+" "+a] = queueValue(t, c[0], c[1], a)
		}
	}
	return m
}

func sameValues(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

// checkRFSPlus enables RFS+ on h, which sets the study's 32768 everywhere
// and leaves rps_cpus alone, checks status, and disables it again.
func checkRFSPlus(t *testing.T, bin string, h testbed.Host, before map[string]string) {
	t.Helper()
	hostDevs, ctrs := studyDevs(h)
	out, code := falcon(t, bin, "enable", "--netns", h.Netns, "--mode", "rfs", "--container-level")
	if code != 0 || !strings.Contains(out, "no agent runs") {
		t.Fatalf("enable: exit %d\n%s", code, out)
	}
	want := map[string]string{}
	for k, v := range before {
		want[k] = v
		if strings.HasSuffix(k, "rps_flow_cnt") || k == "global" {
			want[k] = "32768"
		}
	}
	sameValues(t, "rfs+", want, studyValues(t, h))
	if out, code := falcon(t, bin, "status", "--netns", h.Netns, "--ready"); code != 0 || !strings.Contains(out, "mode rfs applied") {
		t.Errorf("status --ready: exit %d\n%s", code, out)
	}
	r := statusJSON(t, bin, h.Netns)
	if !r.Static || r.Running || r.Mode != "rfs" || len(r.Values) != 1+len(hostDevs)+len(ctrs) {
		t.Errorf("status: static %v, running %v, mode %s, %d values; want static rfs with %d values",
			r.Static, r.Running, r.Mode, len(r.Values), 1+len(hostDevs)+len(ctrs))
	}
	out, _ = falcon(t, bin, "status", "--netns", h.Netns)
	for _, s := range append([]string{"none needed", "rps_sock_flow_entries = 32768", "values set"}, hostDevs...) {
		if !strings.Contains(out, s) {
			t.Errorf("status does not say %q:\n%s", s, out)
		}
	}
	if out, code := falcon(t, bin, "disable", "--netns", h.Netns); code != 0 {
		t.Fatalf("disable: exit %d\n%s", code, out)
	}
	sameValues(t, "disabled", before, studyValues(t, h))
}

// waitAgentReady waits for a foreground agent on ns to be ready; a hang
// guard, as an agent under emulation takes over 30 s (internal/agent's
// helperAgent).
func waitAgentReady(t *testing.T, bin, ns string, exited <-chan error, log *strings.Builder) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if out, code := falcon(t, bin, "status", "--netns", ns, "--ready"); code == 0 {
			if !strings.Contains(out, "agent pid") {
				t.Errorf("status --ready of a running agent: %s", out)
			}
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("agent exited: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent not ready:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
