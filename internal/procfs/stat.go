// Package procfs parses the kernel counters falcon-lab bench records around each
// run: /proc/stat, /proc/softirqs, /proc/interrupts, /proc/net/softnet_stat
// and /proc/net/{snmp,netstat}. Parsers take the file contents so they can be
// tested on recorded files; Read* read the live ones.
package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes are the cumulative times of one /proc/stat cpu line, in USER_HZ
// ticks. Guest and GuestNice are already included in User and Nice by the
// kernel, so they are kept for reference but never summed.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal, Guest, GuestNice uint64
}

// total is the sum of all disjoint fields (guest time is part of user time).
func (t CPUTimes) total() uint64 {
	return t.User + t.Nice + t.System + t.Idle + t.IOWait + t.IRQ + t.SoftIRQ + t.Steal
}

// Stat holds the "cpu" (Total) and "cpuN" lines of /proc/stat.
type Stat struct {
	Total CPUTimes
	CPU   map[int]CPUTimes
}

// ParseStat parses the contents of /proc/stat.
func ParseStat(b []byte) (Stat, error) {
	st := Stat{CPU: map[int]CPUTimes{}}
	seenTotal := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024) // the intr line is long
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		// Kernels before 2.6.33 print fewer columns; 4 (up to idle) is the minimum.
		if len(f) < 5 {
			return Stat{}, fmt.Errorf("/proc/stat: %q: want at least 4 counters", sc.Text())
		}
		var v [10]uint64
		for i := 1; i < len(f) && i <= len(v); i++ {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return Stat{}, fmt.Errorf("/proc/stat: %s column %d: %w", f[0], i, err)
			}
			v[i-1] = n
		}
		t := CPUTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]}
		if f[0] == "cpu" {
			st.Total, seenTotal = t, true
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || cpu < 0 {
			return Stat{}, fmt.Errorf("/proc/stat: bad cpu label %q", f[0])
		}
		st.CPU[cpu] = t
	}
	if err := sc.Err(); err != nil {
		return Stat{}, fmt.Errorf("/proc/stat: %w", err)
	}
	if !seenTotal {
		return Stat{}, fmt.Errorf("/proc/stat: no \"cpu\" line")
	}
	return st, nil
}

// ReadStat reads /proc/stat.
func ReadStat() (Stat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// CPUUsage is how a CPU spent an interval, each field in percent of it.
type CPUUsage struct {
	Usr    float64 `json:"usr"` // user + nice
	Sys    float64 `json:"sys"`
	Soft   float64 `json:"soft"`
	IRQ    float64 `json:"irq"`
	Idle   float64 `json:"idle"`
	IOWait float64 `json:"iowait"`
	Steal  float64 `json:"steal"`
}

// Usage is the share of each kind of time between two samples of one CPU.
// Counters that went backwards (idle and iowait may, on some kernels) count
// as zero. When no tick elapsed the CPU is reported idle, not busy: there is
// nothing to divide, and a zero-length window saw no work.
func Usage(before, after CPUTimes) CPUUsage {
	d := func(a, b uint64) uint64 {
		if b < a {
			return 0
		}
		return b - a
	}
	usr := d(before.User, after.User) + d(before.Nice, after.Nice)
	sys := d(before.System, after.System)
	soft := d(before.SoftIRQ, after.SoftIRQ)
	irq := d(before.IRQ, after.IRQ)
	idle := d(before.Idle, after.Idle)
	iow := d(before.IOWait, after.IOWait)
	steal := d(before.Steal, after.Steal)
	total := usr + sys + soft + irq + idle + iow + steal
	if total == 0 {
		return CPUUsage{Idle: 100}
	}
	pct := func(x uint64) float64 { return 100 * float64(x) / float64(total) }
	return CPUUsage{Usr: pct(usr), Sys: pct(sys), Soft: pct(soft), IRQ: pct(irq),
		Idle: pct(idle), IOWait: pct(iow), Steal: pct(steal)}
}

// Busy is Falcon's load definition: everything but idle and iowait, so
// softirq and steal time count as load.
func (u CPUUsage) Busy() float64 {
	return 100 - u.Idle - u.IOWait
}
