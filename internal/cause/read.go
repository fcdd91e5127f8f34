package cause

import (
	"fmt"
	"os"
	"time"

	"github.com/falconnet/falcon/internal/procfs"
)

// Reader reads the per-CPU causes: /proc/stat (busy and softirq time),
// /proc/softirqs (NET_RX) and /proc/net/softnet_stat (backlog drops and
// NAPI squeezes), as differences since the previous Read. Measured on 2
// vCPUs: BenchmarkRead.
type Reader struct {
	read    func(string) ([]byte, error) // tests replace it; nil: the live files
	prev    procfs.Stat
	netRx   []uint64
	softnet map[int]procfs.Softnet
	at      time.Time
}

// Read returns each CPU's causes since the previous Read, and the
// window's length; the first Read only starts the window (nil, 0).
func (r *Reader) Read() ([]CPU, float64, error) {
	now := time.Now()
	st, err := procfs.ParseStat(r.file("/proc/stat"))
	if err != nil {
		return nil, 0, err
	}
	si, err := procfs.ParseSoftirqs(r.file("/proc/softirqs"))
	if err != nil {
		return nil, 0, err
	}
	sn, err := procfs.ParseSoftnet(r.file("/proc/net/softnet_stat"))
	if err != nil {
		return nil, 0, err
	}
	softnet := map[int]procfs.Softnet{}
	for _, s := range sn {
		softnet[s.CPU] = s
	}
	defer func() { r.prev, r.netRx, r.softnet, r.at = st, si["NET_RX"], softnet, now }()
	if r.at.IsZero() {
		return nil, 0, nil
	}
	return Diff(r.prev, st, r.netRx, si["NET_RX"], r.softnet, softnet), float64(now.Sub(r.at).Microseconds()) / 1000, nil
}

func (r *Reader) file(path string) []byte {
	read := r.read
	if read == nil {
		read = readFile
	}
	b, err := read(path)
	if err != nil {
		return []byte(fmt.Sprintf("unreadable %s: %v", path, err)) // the parser says so
	}
	return b
}

// Diff is each CPU's causes between two readings.
func Diff(st0, st1 procfs.Stat, rx0, rx1 []uint64, sn0, sn1 map[int]procfs.Softnet) []CPU {
	var out []CPU
	for id := 0; id < maxCPU(st1); id++ {
		t1, ok := st1.CPU[id]
		if !ok {
			continue
		}
		u := procfs.Usage(st0.CPU[id], t1)
		busy := func(t procfs.CPUTimes) uint64 {
			return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal
		}
		c := CPU{ID: id, Busy: round(u.Busy()), Softirq: round(u.Soft), BusyTicks: sub(busy(st0.CPU[id]), busy(t1)),
			NetRx: sub(at(rx0, id), at(rx1, id))}
		if s1, ok := sn1[id]; ok {
			s0 := sn0[id]
			c.Dropped, c.Squeezed = sub(s0.Dropped, s1.Dropped), sub(s0.TimeSqueeze, s1.TimeSqueeze)
		}
		out = append(out, c)
	}
	return out
}

// NICByNetRx: with no hook counters (stood down) the NIC's stage runs
// where NET_RX softirqs run most: CPUs with at least a quarter of the
// busiest one's count and softirq time to speak of.
func NICByNetRx(cpus []CPU) []int {
	var top uint64
	for _, c := range cpus {
		top = max(top, c.NetRx)
	}
	out := []int{}
	for _, c := range cpus {
		if top > 0 && 4*c.NetRx >= top && c.Softirq >= minSoftirq {
			out = append(out, c.ID)
		}
	}
	return out
}

func maxCPU(st procfs.Stat) int {
	n := 0
	for id := range st.CPU {
		n = max(n, id+1)
	}
	return n
}

func at(xs []uint64, i int) uint64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

func sub(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}

func round(x float64) float64 { return float64(int(x*10+0.5)) / 10 }

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
