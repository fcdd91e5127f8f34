package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
)

// Softirqs is /proc/softirqs: softirq name ("NET_RX") -> count per CPU,
// indexed by CPU number.
type Softirqs map[string][]uint64

// Interrupts is /proc/interrupts: row label without the colon ("RES",
// "LOC", "24") -> count per CPU, indexed by CPU number. Rows the kernel
// prints with a single machine-wide count (ERR, MIS) have one element.
type Interrupts map[string][]uint64

// parseCPUHeader reads a "CPU0 CPU1 ..." header into the CPU number of each
// column. /proc/interrupts lists only online CPUs, so column i is not
// necessarily CPU i.
func parseCPUHeader(line string) ([]int, error) {
	var cpus []int
	for _, f := range strings.Fields(line) {
		n, err := strconv.Atoi(strings.TrimPrefix(f, "CPU"))
		if !strings.HasPrefix(f, "CPU") || err != nil || n < 0 || n > cpuset.MaxID { // rows are as wide as the largest id
			return nil, fmt.Errorf("bad CPU column %q in header", f)
		}
		cpus = append(cpus, n)
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("no CPU columns in header")
	}
	return cpus, nil
}

// parsePerCPU parses the shared layout of /proc/softirqs and
// /proc/interrupts: a CPU header, then "LABEL: n n n [description]".
func parsePerCPU(file string, b []byte) (map[string][]uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	if !sc.Scan() {
		return nil, fmt.Errorf("%s: empty", file)
	}
	cpus, err := parseCPUHeader(sc.Text())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	width := 0
	for _, c := range cpus {
		width = max(width, c+1)
	}
	out := map[string][]uint64{}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		label, ok := strings.CutSuffix(f[0], ":")
		if !ok {
			return nil, fmt.Errorf("%s: line %q: no label", file, sc.Text())
		}
		var counts []uint64
		for i := 1; i < len(f) && len(counts) < len(cpus); i++ {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				break // the description starts here
			}
			counts = append(counts, n)
		}
		switch len(counts) {
		case 0:
			return nil, fmt.Errorf("%s: line %q: no counts", file, sc.Text())
		case len(cpus):
			row := make([]uint64, width)
			for i, n := range counts {
				row[cpus[i]] = n
			}
			out[label] = row
		default:
			out[label] = counts
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

// ParseSoftirqs parses the contents of /proc/softirqs.
func ParseSoftirqs(b []byte) (Softirqs, error) {
	m, err := parsePerCPU("/proc/softirqs", b)
	return Softirqs(m), err
}

// ReadSoftirqs reads /proc/softirqs.
func ReadSoftirqs() (Softirqs, error) {
	b, err := os.ReadFile("/proc/softirqs")
	if err != nil {
		return nil, err
	}
	return ParseSoftirqs(b)
}

// ParseInterrupts parses the contents of /proc/interrupts.
func ParseInterrupts(b []byte) (Interrupts, error) {
	m, err := parsePerCPU("/proc/interrupts", b)
	return Interrupts(m), err
}

// ReadInterrupts reads /proc/interrupts.
func ReadInterrupts() (Interrupts, error) {
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		return nil, err
	}
	return ParseInterrupts(b)
}
