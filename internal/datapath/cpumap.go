package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// cpumapState exists while at least one split hook is attached.
type cpumapState struct {
	spec    *ebpf.CollectionSpec
	cpumap  *ebpf.Map
	stats   *ebpf.Map
	progs   []*ebpf.Program // tracepoint programs
	links   []link.Link
	entries map[int]bool
	pin     string
	// parked: no split hook is attached. The maps and programs stay
	// loaded for the next attach (a comeback after a stand-down): loading
	// the split program costs its verifier about 0.6 s of CPU on the 2-vCPU
	// VM, the cpumap and its tracepoints 15 ms. Without entries the cpumap
	// has no kthread, and the tracepoints are detached.
	parked bool
}

// start attaches the tracepoint programs, creates the entries of set
// (their kthreads) and pins the statistics in pinDir ("" = none). The
// statistics start from zero: the frames they count against a queue's
// size must be the queue's.
func (s *cpumapState) start(set []int, pinDir string) error {
	var zero splitSplitStats
	for i := uint32(0); i < s.stats.MaxEntries(); i++ {
		if err := s.stats.Put(i, &zero); err != nil {
			return fmt.Errorf("reset cpumap statistics: %w", err)
		}
	}
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{{"xdp_cpumap_enqueue", s.progs[0]}, {"xdp_cpumap_kthread", s.progs[1]}} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp.name, Program: tp.prog})
		if err != nil {
			return fmt.Errorf("attach raw tracepoint %s: %w", tp.name, err)
		}
		s.links = append(s.links, l)
	}
	if err := s.sync(set, true); err != nil {
		return err
	}
	if pinDir != "" {
		p := filepath.Join(pinDir, splitStatsPin)
		if err := s.stats.Pin(p); err != nil {
			return fmt.Errorf("pin %s: %w", splitStatsPin, err)
		}
		s.pin = p
	}
	s.parked = false
	return nil
}

// park undoes start, keeping the maps and programs.
func (s *cpumapState) park() error {
	errs := []error{s.sync(nil, false)}
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	s.links = nil
	errs = append(errs, s.unpin())
	s.parked = true
	return errors.Join(errs...)
}

func (s *cpumapState) unpin() error {
	if s.pin == "" {
		return nil
	}
	err := s.stats.Unpin()
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	s.pin = ""
	return err
}

func (s *cpumapState) close() error {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	for _, p := range s.progs {
		errs = append(errs, p.Close())
	}
	if s.pin != "" {
		if err := os.Remove(s.pin); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if s.stats != nil {
		errs = append(errs, s.stats.Close())
	}
	if s.cpumap != nil {
		errs = append(errs, s.cpumap.Close())
	}
	return errors.Join(errs...)
}

// checkPossible: cpumap entries exist only for possible CPUs, and one for
// an offline CPU would hang its creation (the kernel waits for the entry's
// kthread to start on that CPU).
func checkPossible(cpus []int) error {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	for _, c := range cpus {
		if c >= n {
			return fmt.Errorf("split CPU %d does not exist: this machine has CPUs 0-%d", c, n-1)
		}
		// Absent for CPUs that cannot go offline.
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", c))
		if err == nil && strings.TrimSpace(string(b)) == "0" {
			return fmt.Errorf("split CPU %d is offline", c)
		}
	}
	return nil
}

// sync adds cpumap entries for set (add) or removes those not in it: a
// changed set is added before the program may choose its CPUs and removed
// after it no longer does. Each entry starts a kthread on its CPU.
func (s *cpumapState) sync(set []int, add bool) error {
	for _, c := range set {
		if add && !s.entries[c] {
			if err := s.cpumap.Put(uint32(c), uint32(CPUMapQueue)); err != nil {
				return fmt.Errorf("cpumap entry for CPU %d: %w", c, err)
			}
			s.entries[c] = true
		}
	}
	if add {
		return nil
	}
	for c := range s.entries {
		if !slices.Contains(set, c) {
			if err := s.cpumap.Delete(uint32(c)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("remove cpumap entry for CPU %d: %w", c, err)
			}
			delete(s.entries, c)
		}
	}
	return nil
}

// CPUMapStats is one split CPU's cpumap traffic, from the tracepoints
// xdp:xdp_cpumap_enqueue and xdp:xdp_cpumap_kthread.
type CPUMapStats struct {
	Enqueued     uint64 `json:"enqueued"`        // frames put on its queue
	EnqueueDrops uint64 `json:"enqueue_drops"`   // frames its full queue refused: dropped
	QueueFull    uint64 `json:"queue_full"`      // frames split dropped as its queue might have been full (counted by the guard)
	FullInline   uint64 `json:"full_inline"`     // micro-flow frames built on the interrupt CPU instead (mode mflow)
	RedirectFail uint64 `json:"redirect_failed"` // redirects that found no entry: built on the interrupt CPU
	Built        uint64 `json:"built"`           // frames its kthread turned into skbs
	BuildDrops   uint64 `json:"build_drops"`     // frames its kthread dropped (skb allocation failed)
	Batches      uint64 `json:"batches"`         // kthread rounds that found frames
	Sleeps       uint64 `json:"sleeps"`          // times the kthread slept or yielded the CPU
}

func readCPUMapStats(m *ebpf.Map) (map[int]CPUMapStats, error) {
	out := map[int]CPUMapStats{}
	var k uint32
	var v splitSplitStats
	it := m.Iterate()
	for it.Next(&k, &v) {
		s := CPUMapStats{Enqueued: v.Enqueued, EnqueueDrops: v.EnqueueDrops, QueueFull: v.Full, FullInline: v.FullInline, RedirectFail: v.RedirectFail,
			Built: v.Built, BuildDrops: v.BuildDrops, Batches: v.Batches, Sleeps: v.Sleeps}
		if s != (CPUMapStats{}) {
			out[int(k)] = s
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read cpumap statistics: %w", err)
	}
	return out, nil
}
