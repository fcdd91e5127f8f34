// Package cpuset is falcon's one notion of a set of CPUs: the kernel's list
// syntax ("0-3,6", as in /sys/devices/system/cpu/online and taskset -c),
// the hex mask of rps_cpus, and the CPUs this machine has online.
package cpuset

import (
	"fmt"
	bits64 "math/bits"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/quote"
)

// Set is a set of CPU ids, sorted and free of duplicates when it comes
// from Parse or Of. It is a plain []int underneath, so it encodes to JSON
// as a list of numbers.
type Set = []int

// Of returns cpus sorted and free of duplicates.
func Of(cpus ...int) Set {
	c := slices.Clone(cpus)
	slices.Sort(c)
	return slices.Compact(c)
}

// MaxID is the largest CPU id Linux can have: CONFIG_NR_CPUS tops out at
// 8192 (x86 with MAXSMP, powerpc). Parsers refuse larger ids rather than
// size anything by them (a mask, a per-CPU row, a loop up to the id).
const MaxID = 8191

// Parse reads the kernel's CPU list syntax ("0-3,6"). The result is sorted
// and free of duplicates; an empty list is an error, and so is an id
// above MaxID. Its memory is bounded whatever the input (a bitmap of every
// id Linux can have, 1 KB), and its time by the input's length: a range
// costs a few words of the bitmap however wide it is, so a list that
// repeats 0-8191 costs no more than one that says it once.
func Parse(s string) (Set, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty CPU list")
	}
	var bits [MaxID/64 + 1]uint64
	for rest, more := s, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, ",")
		a, b, err := parseRange(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("bad CPU list %s: %w", quote.Short(s), err)
		}
		for c := a; c <= b; {
			if c%64 == 0 && b-c >= 63 {
				bits[c/64] = ^uint64(0)
				c += 64
				continue
			}
			bits[c/64] |= 1 << (c % 64)
			c++
		}
	}
	var out Set
	for w, word := range bits {
		for ; word != 0; word &= word - 1 {
			out = append(out, w*64+bits64.TrailingZeros64(word))
		}
	}
	return out, nil
}

// parseRange reads one part of a CPU list: an id or a range of ids.
func parseRange(part string) (lo, hi int, err error) {
	l, h, isRange := strings.Cut(part, "-")
	a, err := strconv.Atoi(l)
	if err != nil || a < 0 {
		return 0, 0, fmt.Errorf("%s is not a CPU number or range (like 0-3,6)", quote.Short(part))
	}
	b := a
	if isRange {
		if b, err = strconv.Atoi(h); err != nil || b < a {
			return 0, 0, fmt.Errorf("%s is not a range (like 2-5)", quote.Short(part))
		}
	}
	if b > MaxID {
		return 0, 0, fmt.Errorf("CPU %d is beyond the largest id Linux has (%d)", b, MaxID)
	}
	return a, b, nil
}

// Format writes cpus in the kernel's list syntax, ranges collapsed:
// "0-2,5".
func Format(cpus []int) string {
	c := Of(cpus...)
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

// Mask writes cpus as a sysfs CPU mask (rps_cpus): hex words of 32 CPUs,
// most significant first, separated by commas.
func Mask(cpus []int) string {
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

// Where the kernel lists its CPUs; tests move them.
var (
	onlinePath  = "/sys/devices/system/cpu/online"
	presentPath = "/sys/devices/system/cpu/present"
)

// Online reads the CPUs the kernel has online.
func Online() (Set, error) { return read(onlinePath) }

// Present reads the CPUs this machine has, online or not.
func Present() (Set, error) { return read(presentPath) }

func read(path string) (Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(b))
}

// Check says clearly which of cpus do not exist or are offline.
func Check(cpus []int) error {
	online, err := Online()
	if err != nil {
		return fmt.Errorf("read online CPUs: %w", err)
	}
	present, err := Present()
	if err != nil {
		present = online
	}
	for _, c := range cpus {
		if !slices.Contains(present, c) {
			return fmt.Errorf("CPU %d does not exist (this machine has CPUs %s)", c, Format(present))
		}
		if !slices.Contains(online, c) {
			return fmt.Errorf("CPU %d is offline (online: %s)", c, Format(online))
		}
	}
	return nil
}
