package workload

import (
	"fmt"
	"strconv"
	"strings"
)

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
