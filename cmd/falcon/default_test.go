package main

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/agent"
)

// TestDefaultModeCLI: enable with no mode runs falcon with the fast path
// where it fits. A ruleset the fast path cannot follow (a rate limit
// decides per packet) keeps the fast path off, not the agent: enable
// succeeds, status says why, and the fast path comes on once the rule is
// gone. The explicit falcon+fastpath still refuses such a host, before
// changing anything.
func TestDefaultModeCLI(t *testing.T) {
	bin, tb := cliTestbed(t, "m")
	h := tb.Hosts[1]
	t.Cleanup(func() {
		falcon(t, bin, "disable", "--netns", h.Netns)
		exec.Command("ip", "netns", "exec", h.Netns, "nft", "delete", "table", "inet", "fctdefault").Run()
	})
	nftIn(t, h.Netns, "add table inet fctdefault")
	nftIn(t, h.Netns, "add chain inet fctdefault chk { type filter hook forward priority 0 ; }")
	nftIn(t, h.Netns, "add rule inet fctdefault chk udp dport 9 limit rate over 100/second drop")

	if out, code := falcon(t, bin, "enable", "--netns", h.Netns, "--mode", "falcon+fastpath"); code != 1 || !strings.Contains(out, "limit") {
		t.Errorf("enable --mode falcon+fastpath under a rate limit: exit %d, want 1 naming the limit\n%s", code, out)
	}
	if r := statusJSON(t, bin, h.Netns); r.Enabled {
		t.Fatalf("a refused enable left an agent: %+v", r)
	}
	if out, code := falcon(t, bin, "enable", "--netns", h.Netns); code != 0 || !strings.Contains(out, "(mode auto,") {
		t.Fatalf("enable (the default mode) under a rate limit: exit %d\n%s", code, out)
	}
	r := waitFastReport(t, bin, h.Netns, "off for the limit", func(f *agent.FastReport) bool { return strings.Contains(f.Off, "limit") })
	if r.Mode != agent.ModeFalcon || r.Policy != "adaptive" || r.FastpathWhy != "" || len(r.FastPath.Hooks) == 0 {
		t.Errorf("default mode: %+v", r)
	}
	out, _ := falcon(t, bin, "status", "--netns", h.Netns)
	if !strings.Contains(out, "OFF: ") || !strings.Contains(out, "policy adaptive") || !strings.Contains(out, "mode auto") {
		t.Errorf("status does not say the fast path is off and why:\n%s", out)
	}
	if runtime.NumCPU() < 3 && !strings.Contains(out, "never on it") {
		t.Errorf("status on %d CPUs does not say steering never comes on the path:\n%s", runtime.NumCPU(), out)
	}

	nftIn(t, h.Netns, "delete table inet fctdefault")
	waitFastReport(t, bin, h.Netns, "on once the rule went", func(f *agent.FastReport) bool { return f.Off == "" })
	if out, code := falcon(t, bin, "disable", "--netns", h.Netns); code != 0 {
		t.Errorf("disable: exit %d\n%s", code, out)
	}
}

// waitFastReport polls status until its fast path report satisfies ok
// (the agent publishes it every second).
func waitFastReport(t *testing.T, bin, ns, what string, ok func(*agent.FastReport) bool) agent.Report {
	t.Helper()
	var r agent.Report
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r = statusJSON(t, bin, ns); r.FastPath != nil && ok(r.FastPath) {
			return r
		}
	}
	t.Fatalf("the fast path never was %s within 15 s: %+v (fast path %+v)", what, r, r.FastPath)
	return r
}

func nftIn(t *testing.T, ns, cmd string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "nft '"+cmd+"'").CombinedOutput(); err != nil {
		t.Fatalf("nft %s in %s: %v\n%s", cmd, ns, err, out)
	}
}
