package agent

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// noMemProfile stops the runtime's memory profiling for the rest of the
// test. The falcon binary has none (the linker drops it where nothing
// reads the profile); a test binary samples an allocation every 512 KiB
// and keeps a bucket per stack and size for good, which grew the drills'
// resident set by about 4 KiB a cycle and would pass for the agent's.
func noMemProfile(t *testing.T) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 0
	t.Cleanup(func() { runtime.MemProfileRate = old })
}

// memSample is the test process's memory, in which the agent runs: the
// live heap after a full collection, the resident set, goroutines and open
// file descriptors.
type memSample struct {
	at         time.Duration
	cycle      int
	heap, rss  uint64
	goroutines int
	fds        int
	threads    int
	maps       string // resident memory by kind of mapping (smaps), when FALCON_DRILL_SMAPS is set
	runtime    string // what the Go runtime holds from the OS, by use, when FALCON_DRILL_SMAPS is set
}

func sampleMem(start time.Time, cycle int) memSample {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := memSample{at: time.Since(start), cycle: cycle, heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				s.rss = kb << 10
			} else if len(f) >= 2 && f[0] == "Threads:" {
				s.threads, _ = strconv.Atoi(f[1])
			}
		}
	}
	s.fds = steadyFDs()
	if os.Getenv("FALCON_DRILL_SMAPS") != "" {
		s.maps = smapsSummary()
		k := func(v uint64) uint64 { return v >> 10 }
		s.runtime = fmt.Sprintf("heap %d KiB of which released %d, stacks %d, spans %d, GC %d, other %d, profiling %d",
			k(ms.HeapSys), k(ms.HeapReleased), k(ms.StackSys), k(ms.MSpanSys), k(ms.GCSys), k(ms.OtherSys), k(ms.BuckHashSys))
	}
	return s
}

// steadyFDs counts the process's open file descriptors, the fewest of a
// few reads 10 ms apart: the drill's busy loop is a process started every
// 300 ms, and starting one opens up to six descriptors for a moment (its
// /dev/null, the error pipe, the pidfd), which a single read can catch
// (CI once: 12 -> 17 at the last cycle). A leaked descriptor stays open
// through every read.
func steadyFDs() int {
	n := -1
	for i := 0; i < 5; i++ {
		if i > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if ents, err := os.ReadDir("/proc/self/fd"); err == nil && (n < 0 || len(ents) < n) {
			n = len(ents)
		}
	}
	return n
}

// smapsSummary sums the resident memory of the process's mappings by what
// they map (anonymous, a file, a BPF map ...) and counts them.
func smapsSummary() string {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return err.Error()
	}
	rss, n := map[string]uint64{}, map[string]int{}
	kind := ""
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			kind = "anon"
			if len(f) >= 6 {
				kind = f[5]
				if strings.HasPrefix(kind, "/") {
					kind = "file"
				}
			}
			n[kind]++
		case len(f) >= 2 && f[0] == "Rss:":
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss[kind] += kb
		}
	}
	var out []string
	for k, v := range rss {
		out = append(out, fmt.Sprintf("%s %d KiB in %d", k, v, n[k]))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

func (s memSample) String() string {
	m := ""
	if s.maps != "" {
		m = " (mappings: " + s.maps + "; runtime: " + s.runtime + ")"
	}
	return fmt.Sprintf("cycle %d at %v: heap %.1f MiB, RSS %.1f MiB, %d goroutines, %d threads, %d fds%s", s.cycle,
		s.at.Round(time.Second), float64(s.heap)/(1<<20), float64(s.rss)/(1<<20), s.goroutines, s.threads, s.fds, m)
}

// flat says what grew from a to b beyond small bounds: the live heap by
// 4 MiB, the resident set by 16 MiB (the runtime keeps some freed pages),
// goroutines and file descriptors by 4 (the traffic's own come and go).
func flat(a, b memSample) []string {
	var s []string
	if b.heap > a.heap+4<<20 {
		s = append(s, fmt.Sprintf("heap grew %.1f MiB", float64(b.heap-a.heap)/(1<<20)))
	}
	if b.rss > a.rss+16<<20 {
		s = append(s, fmt.Sprintf("RSS grew %.1f MiB", float64(b.rss-a.rss)/(1<<20)))
	}
	if b.goroutines > a.goroutines+4 {
		s = append(s, fmt.Sprintf("goroutines %d -> %d", a.goroutines, b.goroutines))
	}
	if b.fds > a.fds+4 {
		s = append(s, fmt.Sprintf("fds %d -> %d", a.fds, b.fds))
	}
	return s
}

// trend is the least-squares slope of v over the samples, per 100 cycles.
func trend(ms []memSample, v func(memSample) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, m := range ms {
		x, y := float64(m.cycle), v(m)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return 100 * (n*sxy - sx*sy) / d
}
