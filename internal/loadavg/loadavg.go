// Package loadavg samples per-CPU load the way FALCON does: busy percent
// (100 − idle − iowait) from the kernel's CPU statistics every interval,
// smoothed by an exponentially weighted moving average of weight 0.2. It
// reads /proc/stat rather than kernel_cpustat from BPF because only
// /proc/stat adds the idle time of NO_HZ CPUs.
package loadavg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/procfs"
)

// Defaults from the paper (every 10 jiffies, EWMA weight 0.2).
const (
	DefaultInterval = 10 * time.Millisecond
	DefaultWeight   = 0.2
)

// Sample is the smoothed load at one moment.
type Sample struct {
	PerCPU      []uint32 // busy percent by CPU id; CPUs never seen are 0
	Avg         uint32   // mean of PerCPU over the CPU set
	MonotonicNs uint64   // CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns
}

// Sampler publishes a Sample every Interval until its context ends.
type Sampler struct {
	CPUs     []int         // the set whose average is Avg
	Interval time.Duration // 0 = DefaultInterval
	Weight   float64       // weight of the newest reading; 0 = DefaultWeight
	// Publish receives each sample; an error stops the sampler.
	Publish func(Sample) error
	// RealTime runs the sampler on an OS thread of its own at SCHED_FIFO
	// priority 1, sleeping in the kernel between samples, so that it keeps
	// its cadence when softirqs saturate every CPU (ksoftirqd and the Go
	// runtime's own threads are ordinary tasks it preempts). Where the
	// policy cannot be set (no CAP_SYS_NICE), Warn hears why and the
	// sampler runs as an ordinary task. The thread runs Go code only with
	// a P, though: where the process keeps every P busy (2 vCPUs, 4
	// spinning goroutines on 2 Ps) it waits for them behind their starved
	// threads, and a 10 ms cadence slipped to 2.2 s. An agent's goroutines
	// are idle but for moments; a process that spins more goroutines than
	// it has Ps needs more Ps. While resting (Resting) the thread is an
	// ordinary task sleeping on Go timers: nothing decides with its samples
	// then, and a real-time thread delays the workload (rtThread).
	RealTime bool
	Warn     func(error)
	// While every CPU's load stays below QuietBelow (percent; 0 = never),
	// the interval doubles after each sample, up to MaxInterval; a CPU at
	// or above it brings Interval back at once. Each sample wakes a CPU and
	// preempts whatever runs there: at 100 samples/s that alone raised
	// ping-pong p99 by half on 2 vCPUs, where nothing was busy enough for the
	// load to matter.
	QuietBelow  uint32
	MaxInterval time.Duration
	// Resting, when it says so, keeps the interval at MaxInterval whatever
	// the load: nothing decides with the samples then (falcon stood down),
	// and at 100 samples/s the sampler is not free. Only then does a
	// real-time sampler sleep on a Go timer, as an ordinary task.
	Resting func() bool
	// Wake, where set, ends a sleep on a Go timer at once: the sample is
	// taken then, on the real-time thread where RealTime is set, and the
	// interval starts again at Interval. Resting ends while the sampler
	// sleeps so, and that sleep may end late.
	Wake <-chan struct{}
	// read returns /proc/stat; tests replace it.
	read func() ([]byte, error)

	mu   sync.Mutex
	last Sample
	ewma map[int]float64
	prev map[int]procfs.CPUTimes
}

// Last returns the latest published sample (zero before the first).
func (s *Sampler) Last() Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.last
	out.PerCPU = slices.Clone(out.PerCPU)
	return out
}

// Run samples until ctx ends (returning nil) or Publish fails. The first
// sample is published after one interval, once there is a difference to
// compute.
func (s *Sampler) Run(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	if len(s.CPUs) == 0 {
		return errors.New("loadavg: empty CPU set")
	}
	if _, err := s.Step(); err != nil {
		return err
	}
	var rt *rtThread
	if s.RealTime {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		rt = &rtThread{warn: s.Warn}
	}
	next := monotonicNs()
	cur := interval
	for ctx.Err() == nil {
		next += uint64(cur)
		if now := monotonicNs(); now > next {
			next = now // behind (a stall): sample now, not every missed deadline
		}
		sleep := s.sleepTimer
		if rt.keep(!s.resting()) {
			sleep = s.sleepKernel
		}
		woken, ok := sleep(ctx, next)
		if !ok {
			return nil
		}
		if woken {
			cur = interval
			rt.keep(true) // the rest ended: this sample is on the path's cadence
		}
		smp, err := s.Step()
		if err != nil {
			return err
		}
		if s.Publish != nil && smp.MonotonicNs != 0 {
			if err := s.Publish(smp); err != nil {
				return err
			}
		}
		cur = s.nextInterval(smp, cur, interval)
	}
	return nil
}

// nextInterval: back to base when a CPU is busy enough for its load to
// matter, else twice the last, up to MaxInterval.
func (s *Sampler) nextInterval(smp Sample, cur, base time.Duration) time.Duration {
	if s.MaxInterval <= base {
		return base
	}
	if s.resting() {
		return s.MaxInterval
	}
	if s.QuietBelow == 0 {
		return base
	}
	for _, l := range smp.PerCPU {
		if l >= s.QuietBelow {
			return base
		}
	}
	return min(2*cur, s.MaxInterval)
}

func (s *Sampler) resting() bool { return s.Resting != nil && s.Resting() }

// sleepKernel sleeps until the CLOCK_MONOTONIC deadline in clock_nanosleep,
// so that the kernel wakes this very (real-time) thread, with no Go timer
// or runtime thread in between: a Go timer fires on an ordinary thread,
// which softirqs saturating both CPUs starve (on 2 vCPUs a sample came
// 1.05 s late when saturating traffic began after a quiet start: past the
// datapath's stale limit). A quiet sampler on the path keeps its sleeps
// here and its cadence with it; Wake does not end them.
func (s *Sampler) sleepKernel(ctx context.Context, deadline uint64) (woken, ok bool) {
	ts := unix.NsecToTimespec(int64(deadline))
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
	return false, ctx.Err() == nil
}

// sleepTimer sleeps until the deadline on a Go timer: the sampler that is
// no real-time thread, and one that rests. Blocked in clock_nanosleep for
// more than 10 ms, a thread would have Go's sysmon take its P back and
// poll every 20 µs for a while: a stood-down agent sampling every 100 ms
// in the kernel woke sysmon 570 times a second (about 1 % of a CPU on 2
// vCPUs). Resting, the sampler's late samples decide nothing, and Wake
// ends the sleep when the rest does.
func (s *Sampler) sleepTimer(ctx context.Context, deadline uint64) (woken, ok bool) {
	return s.park(ctx, time.Duration(int64(deadline-monotonicNs())))
}

// park sleeps d on a Go timer, or less if ctx ends (ok false) or Wake
// fires (woken).
func (s *Sampler) park(ctx context.Context, d time.Duration) (woken, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-s.Wake:
		return true, true
	case <-t.C:
		return false, true
	}
}

// Step takes one reading and returns the updated sample; the first call
// only records the starting point (and returns a zero Sample).
func (s *Sampler) Step() (Sample, error) {
	read := s.read
	if read == nil {
		read = readCPULines
	}
	b, err := read()
	if err != nil {
		return Sample{}, err
	}
	st, err := procfs.ParseStat(b)
	if err != nil {
		return Sample{}, err
	}
	w := s.Weight
	if w <= 0 || w > 1 {
		w = DefaultWeight
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.prev == nil
	if first {
		s.prev, s.ewma = map[int]procfs.CPUTimes{}, map[int]float64{}
	}
	for cpu, now := range st.CPU {
		before, ok := s.prev[cpu]
		if !ok || total(now) < total(before) { // new (hotplugged) CPU
			s.prev[cpu] = now
			continue
		}
		// /proc/stat counts in USER_HZ ticks (10 ms): a window may see no
		// tick of a CPU at all. Keep its old value and let the next window
		// start from the same reading instead of calling it idle.
		if total(now) == total(before) {
			continue
		}
		busy := math.Max(0, math.Min(100, procfs.Usage(before, now).Busy()))
		if old, ok := s.ewma[cpu]; ok {
			s.ewma[cpu] = w*busy + (1-w)*old
		} else {
			s.ewma[cpu] = busy
		}
		s.prev[cpu] = now
	}
	if first {
		return Sample{}, nil
	}
	maxCPU := 0
	for cpu := range s.ewma {
		maxCPU = max(maxCPU, cpu)
	}
	for _, cpu := range s.CPUs {
		maxCPU = max(maxCPU, cpu)
	}
	smp := Sample{PerCPU: make([]uint32, maxCPU+1), MonotonicNs: monotonicNs()}
	for cpu, v := range s.ewma {
		smp.PerCPU[cpu] = uint32(math.Round(v))
	}
	var sum float64
	for _, cpu := range s.CPUs {
		sum += s.ewma[cpu]
	}
	smp.Avg = uint32(math.Round(sum / float64(len(s.CPUs))))
	s.last = smp
	return smp, nil
}

func total(t procfs.CPUTimes) uint64 {
	return t.User + t.Nice + t.System + t.Idle + t.IOWait + t.IRQ + t.SoftIRQ + t.Steal
}

// readCPULines reads /proc/stat up to the cpu lines: the lines after them
// (intr with one counter per interrupt) are long and of no use here, and
// this runs a hundred times a second.
func readCPULines() ([]byte, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	if i := bytes.Index(b, []byte("\nintr ")); i > 0 {
		b = b[:i+1]
	}
	return b, nil
}

func monotonicNs() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_MONOTONIC): %v", err))
	}
	return uint64(ts.Nano())
}
