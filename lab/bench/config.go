// Package bench runs falcon's benchmark matrix — layout × mode × workload ×
// message size × flow count, several runs each — on fresh testbeds, records
// per-run figures and per-CPU counters, and summarises them (mean, 95 %
// Student-t interval, normalised to a baseline) into one results file that
// holds everything needed to re-plot.
package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/lab/testbed"
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

// Size limits. The papers sweep 16 B .. 64 KiB; UDP payloads (and sockperf
// messages) stop at 65507 (65535 − IPv4 and UDP headers), while TCP writes
// may be larger: the Kubernetes study wrote 128 KiB.
const (
	MinSize    = 16
	MaxSize    = 1 << 20
	MaxUDPSize = 65507
)

// ParseSize reads a message size: "16", "1400", "4K", "4KiB", "64k", "1M",
// and FormatSize's "16 B", "4 KiB". K and M are binary (1024) multiples, as
// the papers' "64 KB" means.
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	mult := 1
	switch {
	case strings.HasSuffix(t, "K"), strings.HasSuffix(t, "k"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"), strings.HasSuffix(t, "m"):
		mult, t = 1<<20, t[:len(t)-1]
	}
	n, err := strconv.Atoi(strings.TrimSpace(t)) // a space may part number and unit
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (want bytes, e.g. 16, 1400, 4K, 64K)", s)
	}
	if n > MaxSize/mult { // before multiplying: a wrapped product may land in range
		return 0, fmt.Errorf("size %q out of range: %d B .. %s", s, MinSize, FormatSize(MaxSize))
	}
	n *= mult
	if n < MinSize {
		return 0, fmt.Errorf("size %q out of range: %d B .. %s", s, MinSize, FormatSize(MaxSize))
	}
	return n, nil
}

// FormatSize writes a size the way ParseSize reads it: "16 B", "4 KiB".
func FormatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = appendUnique(out, n)
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
		out = appendUnique(out, n)
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

func appendUnique[T comparable](list []T, v T) []T {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}
