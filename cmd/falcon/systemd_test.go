package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cli"
)

// The systemd unit starts the agent with flags it accepts.
func TestSystemdUnitFlags(t *testing.T) {
	b, err := os.ReadFile("../../deploy/systemd/falcon-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=\S+/falcon agent (.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no ExecStart=.../falcon agent line")
	}
	args := strings.Fields(string(m[1]))
	fs := app.FlagSet("agent", "")
	f := agent.AddFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		t.Fatalf("falcon agent %s: %v", m[1], err)
	}
	if _, err := agentOptions(f); err != nil {
		t.Errorf("falcon agent %s: %v", m[1], err)
	}
}

// The unit is confined (systemd-analyze security's exposure at most 4.0,
// where 9.6 is a unit with no sandboxing at all), lets the agent write
// every path it writes, and undoes every stop, a crash included.
func TestSystemdUnitHardened(t *testing.T) {
	const unit = "../../deploy/systemd/falcon-agent.service"
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	directive := func(name string) []string {
		var vs []string
		for _, m := range regexp.MustCompile(`(?m)^`+name+`=(.*)$`).FindAllSubmatch(b, -1) {
			vs = append(vs, strings.Fields(string(m[1]))...)
		}
		return vs
	}
	if post := directive("ExecStopPost"); len(post) != 2 || !strings.HasSuffix(post[0], "/falcon") || post[1] != "disable" {
		t.Errorf("ExecStopPost=%s; want falcon disable after every stop, whatever the result", strings.Join(post, " "))
	}
	rw := directive("ReadWritePaths")
	for _, p := range agent.WrittenPaths() {
		if strings.HasPrefix(p, "/sys/") || strings.HasPrefix(p, "/proc/") {
			continue // API file systems, writable under ProtectSystem=strict
		}
		if !slices.ContainsFunc(rw, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") }) {
			t.Errorf("the agent writes %s, which ReadWritePaths=%s does not cover", p, strings.Join(rw, " "))
		}
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, sa, "security", "--offline=true", unit).CombinedOutput()
	if err != nil && strings.Contains(string(out), "--offline") {
		t.Skipf("systemd-analyze without --offline (systemd before 250): %s", out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if e, _ := strconv.ParseFloat(string(m[1]), 64); e > 4.0 {
		t.Errorf("exposure %s, want at most 4.0:\n%s", m[1], out)
	}
}
