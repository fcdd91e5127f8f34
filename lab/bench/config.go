// Package bench runs falcon's benchmark matrix — layout × mode × workload ×
// message size × flow count, several runs each — on fresh testbeds, and
// gathers the runs into one results file that holds everything needed to
// re-plot (lab/schema). It is the orchestration: the flags and presets
// (flags.go, figures.go, placement.go, study.go), the plan of testbeds and
// cases (workloads.go), and the loop that builds each testbed, sets each
// mode up (lab/modes), measures each run (lab/measure) and tears all down
// (run.go), paper-all's many benches (paperall*.go) and the progress line.
// Drawing the file is lab/render's.
package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// ConfigError is a problem with the command line, reported before anything
// is created (the command exits 2).
type ConfigError struct {
	Msg string
	// NeedCPUs is set when the command line is fine but this machine has
	// too few CPUs for it (the scale preset): the fewest it needs.
	NeedCPUs int
}

func (e *ConfigError) Error() string { return e.Msg }

func configErrorf(format string, a ...any) error { return &ConfigError{Msg: fmt.Sprintf(format, a...)} }

// Layouts are the testbed layouts bench can run on.
var Layouts = testbed.Layouts

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := workload.ParseSize(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes given")
	}
	return out, nil
}

func parseInts(s string, min int) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < min {
			return nil, fmt.Errorf("bad number %q (want an integer ≥ %d)", f, min)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
