package loadavg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRecorded replays /proc/stat read every 10 ms on this machine while
// both CPUs were busy: many windows saw no tick of a CPU, and must not be
// taken for idle time.
func TestRecorded(t *testing.T) {
	files, _ := filepath.Glob("testdata/stat-*")
	sort.Strings(files)
	if len(files) < 10 {
		t.Fatal("recordings missing")
	}
	i := 0
	s := &Sampler{CPUs: []int{0, 1}, read: func() ([]byte, error) {
		b, err := os.ReadFile(files[i])
		i++
		return b, err
	}}
	for range files {
		smp, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			continue // the starting point
		}
		if len(smp.PerCPU) != 2 || smp.PerCPU[0] != 100 || smp.PerCPU[1] != 100 || smp.Avg != 100 {
			t.Fatalf("%s: sample %+v, want both CPUs and the average at 100", files[i-1], smp)
		}
		if smp.MonotonicNs == 0 {
			t.Fatal("no timestamp")
		}
	}
}

func stat(ticks ...[2]uint64) []byte {
	s := "cpu  0 0 0 0 0 0 0 0 0 0\n"
	for cpu, t := range ticks {
		s += fmt.Sprintf("cpu%d %d 0 0 %d 0 0 0 0 0 0\n", cpu, t[0], t[1])
	}
	return []byte(s)
}

// TestEWMA checks the smoothing: the first reading is taken as is, later
// ones weigh 0.2, and the average covers only the CPU set.
func TestEWMA(t *testing.T) {
	seq := [][]byte{
		stat([2]uint64{0, 0}, [2]uint64{0, 0}, [2]uint64{0, 0}),
		stat([2]uint64{10, 0}, [2]uint64{0, 10}, [2]uint64{5, 5}),   // 100, 0, 50
		stat([2]uint64{10, 10}, [2]uint64{10, 10}, [2]uint64{5, 5}), // 0, 100, (no tick)
	}
	i := 0
	s := &Sampler{CPUs: []int{0, 2}, read: func() ([]byte, error) { i++; return seq[i-1], nil }}
	want := [][]uint32{nil, {100, 0, 50}, {80, 20, 50}}
	wantAvg := []uint32{0, 75, 65}
	for k := range seq {
		smp, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			continue
		}
		if fmt.Sprint(smp.PerCPU) != fmt.Sprint(want[k]) || smp.Avg != wantAvg[k] {
			t.Errorf("step %d: %v avg %d, want %v avg %d", k, smp.PerCPU, smp.Avg, want[k], wantAvg[k])
		}
	}
}

// TestLive runs the sampler on this machine's /proc/stat while a busy loop
// holds CPU 0: that CPU must show as loaded.
func TestLive(t *testing.T) {
	if testing.Short() {
		t.Skip("spins a CPU")
	}
	spin := exec.Command("taskset", "-c", "0", "sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Skip("taskset:", err)
	}
	defer func() { spin.Process.Kill(); spin.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	n := 0
	s := &Sampler{CPUs: []int{0}, Publish: func(Sample) error { n++; return nil }}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	last := s.Last()
	if n == 0 || len(last.PerCPU) == 0 {
		t.Fatal("nothing published")
	}
	if last.PerCPU[0] < 50 || last.Avg != last.PerCPU[0] {
		t.Errorf("CPU 0 spinning, sample %+v", last)
	}
}

func TestQuietSamplerSlowsDown(t *testing.T) {
	s := &Sampler{QuietBelow: 70, MaxInterval: 100 * time.Millisecond}
	base := 10 * time.Millisecond
	quiet := Sample{PerCPU: []uint32{30, 69}}
	busy := Sample{PerCPU: []uint32{30, 70}}
	cur := base
	var got []time.Duration
	for range 5 {
		cur = s.nextInterval(quiet, cur, base)
		got = append(got, cur)
	}
	want := []time.Duration{20, 40, 80, 100, 100}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("quiet intervals %v, want %v ms", got, want)
		}
	}
	if cur = s.nextInterval(busy, cur, base); cur != base {
		t.Errorf("a CPU at 70 %%: interval %v, want %v at once", cur, base)
	}
	if off := (&Sampler{}).nextInterval(quiet, base, base); off != base {
		t.Errorf("QuietBelow 0: interval %v, want %v", off, base)
	}
	resting := true
	s.Resting = func() bool { return resting }
	if cur = s.nextInterval(busy, base, base); cur != s.MaxInterval {
		t.Errorf("resting with a CPU at 70 %%: interval %v, want %v", cur, s.MaxInterval)
	}
	resting = false
	if cur = s.nextInterval(busy, cur, base); cur != base {
		t.Errorf("no longer resting: interval %v, want %v at once", cur, base)
	}
}

// TestOnlyTimerSleepWakes: Wake ends a sleep on a Go timer (the resting
// sampler's) at once; a sleep in the kernel (the real-time sampler's on
// the path) keeps its deadline whatever Wake says, so that saturation that
// begins during it cannot delay the next sample behind a starved timer
// thread.
func TestOnlyTimerSleepWakes(t *testing.T) {
	wake := make(chan struct{}, 1)
	s := &Sampler{Wake: wake}
	ctx := context.Background()
	wakeIn := func(d time.Duration) { time.AfterFunc(d, func() { wake <- struct{}{} }) }

	start := time.Now()
	wakeIn(20 * time.Millisecond)
	woken, ok := s.sleepTimer(ctx, monotonicNs()+uint64(time.Second))
	if el := time.Since(start); !woken || !ok || el > 500*time.Millisecond {
		t.Errorf("on a timer, woken after 20 ms: woken %v ok %v after %v, want woken at once", woken, ok, el)
	}

	start = time.Now()
	wakeIn(10 * time.Millisecond)
	woken, ok = s.sleepKernel(ctx, monotonicNs()+uint64(80*time.Millisecond))
	if el := time.Since(start); woken || !ok || el < 80*time.Millisecond {
		t.Errorf("in the kernel: woken %v ok %v after %v, want the whole 80 ms", woken, ok, el)
	}
	<-wake // the one sent during the kernel's sleep stays pending

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, ok = s.sleepTimer(cctx, monotonicNs()+uint64(time.Second)); ok {
		t.Error("a sleep on a timer whose context ended: ok, want not")
	}
}

// TestRealTimeOnlyOnThePath: a real-time sampler's thread is SCHED_FIFO
// while its samples decide and an ordinary task while it rests, read by
// Publish, which runs on that thread.
func TestRealTimeOnlyOnThePath(t *testing.T) {
	var resting atomic.Bool
	policies, refused := make(chan uint32, 64), make(chan error, 1)
	s := &Sampler{CPUs: []int{0}, Interval: 5 * time.Millisecond, MaxInterval: 10 * time.Millisecond, RealTime: true,
		Resting: resting.Load, Warn: func(err error) { refused <- err },
		Publish: func(Sample) error {
			a, err := unix.SchedGetAttr(0, 0)
			if err != nil {
				return err
			}
			select {
			case policies <- a.Policy:
			default:
			}
			return nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	want := func(policy uint32, what string) {
		t.Helper()
		for deadline := time.After(5 * time.Second); ; { // a hang guard
			select {
			case p := <-policies:
				if p == policy {
					return
				}
			case err := <-refused:
				t.Skip(err) // no CAP_SYS_NICE
			case err := <-done:
				t.Fatalf("the sampler stopped: %v", err)
			case <-deadline:
				t.Fatalf("%s: no sample published with policy %d", what, policy)
			}
		}
	}
	want(unix.SCHED_FIFO, "on the path")
	resting.Store(true)
	want(unix.SCHED_NORMAL, "resting")
	resting.Store(false)
	want(unix.SCHED_FIFO, "back on the path")
}

// TestWakeSamplesAtOnce: a resting sampler (MaxInterval a second) that is
// woken publishes within a few milliseconds, not at its next deadline.
func TestWakeSamplesAtOnce(t *testing.T) {
	wake := make(chan struct{}, 1)
	got := make(chan time.Time, 16)
	s := &Sampler{CPUs: []int{0}, Interval: 10 * time.Millisecond, MaxInterval: time.Second,
		Resting: func() bool { return true }, Wake: wake,
		Publish: func(Sample) error { got <- time.Now(); return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	<-got // the first, one Interval in
	start := time.Now()
	wake <- struct{}{}
	select {
	case at := <-got:
		if d := at.Sub(start); d > 200*time.Millisecond {
			t.Errorf("woken: published after %v", d)
		}
	case <-time.After(900 * time.Millisecond):
		t.Fatal("woken: nothing published before the resting interval's end")
	}
}
