package main

import (
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
)

// TestBenchFigureBadInput: a figure's preset that cannot run, and
// paper-all asked wrongly, are refused before anything is built.
func TestBenchFigureBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		// Only presets that refuse: as root, a runnable one would run.
		{[]string{"--preset", "k8s3", "--quick"}, 2, "nothing to measure"},
		{[]string{"--preset", "paper-all"}, 2, "--json DIR"},
		{[]string{"--preset", "paper-all", "--json", dir, "--probe"}, 2, "--probe checks one bench"},
		{[]string{"--preset", "paper-all", "--json", dir, "--runs", "0"}, 2, "--runs 0"},
		{[]string{"--preset", "paper-all", "--json", dir, "--layouts", "nope"}, 2, `unknown layout "nope"`},
	}
	if !roottest.Root() {
		// As root this would run every figure.
		cases = append(cases, struct {
			args []string
			code int
			msg  string
		}{[]string{"--preset", "paper-all", "--json", dir, "--quick"}, 1, "needs root"})
	}
	for _, c := range cases {
		err := runBench(c.args)
		if code := cli.ExitCode(err); code != c.code || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("bench %q: exit %d, %v; want exit %d mentioning %q", c.args, code, err, c.code, c.msg)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("bad input wrote %d files into the results directory", len(entries))
	}
}
