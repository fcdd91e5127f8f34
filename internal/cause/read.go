package cause

import (
	"bytes"
	"fmt"
	"time"

	"github.com/falconnet/falcon/internal/procfs"
)

// Reader reads the per-CPU causes: /proc/stat (busy and softirq time),
// /proc/softirqs (NET_RX) and /proc/net/softnet_stat (backlog drops and
// NAPI squeezes), as differences since the previous Read. It keeps the
// files open and parses only what it needs, without allocating per line:
// procfs's general parsers allocated enough per turn (a 64 KiB scanner
// buffer for /proc/stat alone) that the garbage collector cost more than
// the reads. BenchmarkRead measures it.
type Reader struct {
	read  func(string) ([]byte, error) // tests replace it; nil: the live files
	files map[string]*procFile
	prev  []raw
	at    time.Time
}

// raw is one CPU's counters at one reading.
type raw struct {
	seen              bool
	t                 procfs.CPUTimes
	netRx             uint64
	dropped, squeezed uint64
}

// Read returns each CPU's causes since the previous Read, and the
// window's length; the first Read only starts the window (nil, 0).
func (r *Reader) Read() ([]CPU, float64, error) {
	now := time.Now()
	cur := make([]raw, len(r.prev))
	for _, step := range []struct {
		path  string
		parse func([]byte, *[]raw) error
	}{{"/proc/stat", parseStat}, {"/proc/softirqs", parseNetRx}, {"/proc/net/softnet_stat", parseSoftnet}} {
		b, err := r.file(step.path)
		if err == nil {
			err = step.parse(b, &cur)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", step.path, err)
		}
	}
	prev, at := r.prev, r.at
	r.prev, r.at = cur, now
	if at.IsZero() {
		return nil, 0, nil
	}
	return diff(prev, cur), float64(now.Sub(at).Microseconds()) / 1000, nil
}

func (r *Reader) file(path string) ([]byte, error) {
	if r.read != nil {
		return r.read(path)
	}
	f := r.files[path]
	if f == nil {
		var err error
		if f, err = openProc(path); err != nil {
			return nil, err
		}
		if r.files == nil {
			r.files = map[string]*procFile{}
		}
		r.files[path] = f
	}
	return f.read()
}

// diff is each CPU's causes between two readings.
func diff(prev, cur []raw) []CPU {
	var out []CPU
	for id, c := range cur {
		if !c.seen {
			continue
		}
		var p raw
		if id < len(prev) {
			p = prev[id]
		}
		u := procfs.Usage(p.t, c.t)
		busy := func(t procfs.CPUTimes) uint64 { return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal }
		out = append(out, CPU{ID: id, Busy: round(u.Busy()), Softirq: round(u.Soft), BusyTicks: sub(busy(p.t), busy(c.t)),
			NetRx: sub(p.netRx, c.netRx), Dropped: sub(p.dropped, c.dropped), Squeezed: sub(p.squeezed, c.squeezed)})
	}
	return out
}

// at grows rs to hold CPU id and returns its entry.
func at(rs *[]raw, id int) *raw {
	for len(*rs) <= id {
		*rs = append(*rs, raw{})
	}
	return &(*rs)[id]
}

// parseStat reads the cpuN lines of /proc/stat, which come first; it
// stops at the first line after them (the long intr line is never read).
func parseStat(b []byte, rs *[]raw) error {
	n := 0
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(line, []byte("cpu")) {
			if n > 0 {
				break
			}
			continue
		}
		f := fields(line, 11)
		if len(f[0]) == 3 {
			continue // the total
		}
		id, ok := number(f[0][3:], 10)
		if !ok || len(f) < 5 {
			return fmt.Errorf("bad line %q", line)
		}
		var v [10]uint64
		for i := 1; i < len(f) && i <= len(v); i++ {
			v[i-1], _ = number(f[i], 10)
		}
		c := at(rs, int(id))
		c.seen, c.t = true, procfs.CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no cpu line")
	}
	return nil
}

// parseNetRx reads the NET_RX row of /proc/softirqs; its header names
// the CPU of each column (only online CPUs are listed).
func parseNetRx(b []byte, rs *[]raw) error {
	var cols [][]byte
	for line := range bytes.Lines(b) {
		f := fields(line, 0)
		if len(f) == 0 {
			continue
		}
		if cols == nil {
			cols = f
			continue
		}
		if !bytes.Equal(f[0], []byte("NET_RX:")) {
			continue
		}
		for i, col := range cols {
			id, ok := number(bytes.TrimPrefix(col, []byte("CPU")), 10)
			if ok && i+1 < len(f) {
				at(rs, int(id)).netRx, _ = number(f[i+1], 10)
			}
		}
		return nil
	}
	return fmt.Errorf("no NET_RX row")
}

// parseSoftnet reads /proc/net/softnet_stat (hex columns; the CPU in
// column 13 since 5.10, else the line number).
func parseSoftnet(b []byte, rs *[]raw) error {
	i := 0
	for line := range bytes.Lines(b) {
		f := fields(line, 13)
		if len(f) < 3 {
			continue
		}
		id := uint64(i)
		if len(f) >= 13 {
			id, _ = number(f[12], 16)
		}
		c := at(rs, int(id))
		c.dropped, _ = number(f[1], 16)
		c.squeezed, _ = number(f[2], 16)
		i++
	}
	return nil
}

// fields splits line at blanks, at most limit fields (0: all).
func fields(line []byte, limit int) [][]byte {
	var out [][]byte
	for len(line) > 0 && (limit == 0 || len(out) < limit) {
		line = bytes.TrimLeft(line, " \t\n")
		if len(line) == 0 {
			break
		}
		end := bytes.IndexAny(line, " \t\n")
		if end < 0 {
			end = len(line)
		}
		out = append(out, line[:end])
		line = line[end:]
	}
	return out
}

func number(b []byte, base uint64) (uint64, bool) {
	var n uint64
	for _, c := range b {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case base == 16 && c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		n = n*base + d
	}
	return n, len(b) > 0
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

func sub(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}

func round(x float64) float64 { return float64(int(x*10+0.5)) / 10 }
