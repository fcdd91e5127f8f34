package agent

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ParseCPUList parses the kernel's CPU list syntax ("0-3,6"), as in
// /sys/devices/system/cpu/online and taskset -c. The result is sorted and
// free of duplicates.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty CPU list")
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("CPU list %q: %q is not a CPU number or range (like 0-3,6)", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: %q is not a range (like 2-5)", s, part)
			}
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("CPU list %q: range %q too large", s, part)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatCPUList writes cpus in the kernel's list syntax, ranges collapsed.
func FormatCPUList(cpus []int) string {
	c := slices.Clone(cpus)
	slices.Sort(c)
	c = slices.Compact(c)
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", c[i], c[j])
		} else {
			fmt.Fprintf(&b, "%d", c[i])
		}
		i = j + 1
	}
	return b.String()
}

// CPUMask writes cpus as a sysfs CPU mask (rps_cpus): hex words of 32 CPUs,
// most significant first, separated by commas.
func CPUMask(cpus []int) string {
	if len(cpus) == 0 {
		return "0"
	}
	words := make([]uint32, slices.Max(cpus)/32+1)
	for _, c := range cpus {
		words[c/32] |= 1 << (c % 32)
	}
	var parts []string
	for i := len(words) - 1; i >= 0; i-- {
		if len(parts) == 0 {
			parts = append(parts, fmt.Sprintf("%x", words[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%08x", words[i]))
		}
	}
	return strings.Join(parts, ",")
}

// OnlineCPUs reads the CPUs the kernel has online.
func OnlineCPUs() ([]int, error) { return readCPUList("/sys/devices/system/cpu/online") }

func readCPUList(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCPUList(string(b))
}

// checkCPUs says clearly which CPUs do not exist or are offline.
func checkCPUs(cpus []int) error {
	online, err := OnlineCPUs()
	if err != nil {
		return fmt.Errorf("read online CPUs: %w", err)
	}
	possible, err := readCPUList("/sys/devices/system/cpu/present")
	if err != nil {
		possible = online
	}
	for _, c := range cpus {
		if !slices.Contains(possible, c) {
			return fmt.Errorf("CPU %d does not exist (this machine has CPUs %s)", c, FormatCPUList(possible))
		}
		if !slices.Contains(online, c) {
			return fmt.Errorf("CPU %d is offline (online: %s)", c, FormatCPUList(online))
		}
	}
	return nil
}
