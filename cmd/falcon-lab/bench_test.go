package main

import (
	"bytes"
	"fmt"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
)

// TestBenchBadInput: every mistake is reported before anything is built.
func TestBenchBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--layouts", "nope"}, 2, `unknown layout "nope"`},
		{[]string{"--modes", "falcon9"}, 2, `unknown mode "falcon9"`},
		{[]string{"--workloads", "ping"}, 2, `unknown workload "ping"`},
		{[]string{"--sizes", "4"}, 2, "out of range"},
		{[]string{"--workloads", "web:2M"}, 2, "out of range"},
		{[]string{"--workloads", "web", "--flows", "0"}, 2, "--flows"},
		{[]string{"--workloads", "web", "--flows", "5000"}, 2, "more than 1000"},
		{[]string{"--sender-cpus", "4096"}, 2, "not online"},
		{[]string{"--preset", "huge"}, 2, "unknown preset"},
		{[]string{"--bogus"}, 2, "not defined"},
		{[]string{"stray"}, 2, "unexpected argument"},
		{[]string{"--runs", "1", "--duration", "1s", "--json", "/nonexistent-dir/r.json"}, 1, "does not exist"},
	} {
		err := runBench(c.args)
		if code := cli.ExitCode(err); code != c.code || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("bench %q: exit %d, %v; want exit %d mentioning %q", c.args, code, err, c.code, c.msg)
		}
	}
	if roottest.Root() {
		out, _ := exec.Command("ip", "netns", "list").Output()
		if prefix := fmt.Sprintf("fb-b%d-", os.Getpid()); strings.Contains(string(out), prefix) {
			t.Errorf("bad input left namespaces behind:\n%s", out)
		}
	}
}

func TestReport(t *testing.T) {
	var out bytes.Buffer
	reportOut = &out
	t.Cleanup(func() { reportOut = os.Stdout })
	recorded := "../../lab/render/testdata/results.json"
	svg := filepath.Join(t.TempDir(), "r.svg")
	if err := runReport([]string{recorded, "--svg", svg}); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("../../lab/render/testdata/results.md")
	if out.String() != string(want) {
		t.Errorf("report table differs from the golden one:\n%s", out.String())
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
		t.Errorf("svg: %v, %.40q", err, b)
	}
	out.Reset()
	if err := runReport([]string{"--baseline", "docker", recorded}); err != nil || !strings.Contains(out.String(), "| docker/vanilla |") {
		t.Errorf("--baseline docker: %v\n%s", err, out.String())
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{recorded, recorded}, 2},
		{[]string{"--svg"}, 2},
		{[]string{filepath.Join(t.TempDir(), "missing.json")}, 1},
		{[]string{"bench_test.go"}, 1},
	} {
		if code := cli.ExitCode(runReport(c.args)); code != c.code {
			t.Errorf("report %q: exit %d, want %d", c.args, code, c.code)
		}
	}
}
