// Command holdkeys holds, for as long as it runs, the kernel code switches
// that falcon's programs and tests flip whenever they come and go, so that
// the kernel never patches its own code under traffic. Multi-threaded TCG
// can run a stale copy of an instruction the kernel is patching on the
// other CPU (scripts/kernels/guest.sh says what that did); under KVM and on
// hardware the patching is exact, and nothing needs holding.
//
// What it holds:
//   - every tracepoint that a program in the given BPF objects attaches to,
//     with two probes each: a tracepoint's first probe switches its static
//     key, and going between one probe and more rewrites its static call;
//     from two on, further probes change no code;
//   - BPF run-time statistics (a static key that tests switch through
//     ebpf.EnableStats, inlined wherever a BPF program runs).
//
// The list comes from the objects, so a program on a new tracepoint is
// held without an edit here.
//
//	holdkeys OBJECT.o...    # prints "holdkeys: holding ..." once held; runs until SIGTERM
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// probes per tracepoint: from two on, adding or removing one changes no
// kernel code (see the package comment).
const probes = 2

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: holdkeys OBJECT.o...")
		os.Exit(2)
	}
	names, err := tracepoints(os.Args[1:])
	if err != nil {
		fail(err)
	}
	closers, err := hold(names)
	if err != nil {
		fail(err)
	}
	fmt.Printf("holdkeys: holding %d tracepoints with %d probes each and BPF run-time statistics: %v\n", len(names), probes, names)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	for _, c := range slices.Backward(closers) {
		c.Close()
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "holdkeys:", err)
	os.Exit(1)
}

// tracepoints lists, sorted, the tracepoints that the objects' tracing
// and raw tracepoint programs attach to.
func tracepoints(objects []string) ([]string, error) {
	var names []string
	for _, o := range objects {
		spec, err := ebpf.LoadCollectionSpec(o)
		if err != nil {
			return nil, err
		}
		for _, p := range spec.Programs {
			if p.Type == ebpf.RawTracepoint || p.Type == ebpf.Tracing && p.AttachType == ebpf.AttachTraceRawTp {
				names = append(names, p.AttachTo)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("no tracepoint programs in %v", objects)
	}
	return names, nil
}

type closer interface{ Close() error }

// hold attaches probes programs that do nothing to each tracepoint and
// turns run-time statistics on; what it returns undoes that.
func hold(names []string) ([]closer, error) {
	var out []closer
	undo := func(err error) ([]closer, error) {
		for _, c := range slices.Backward(out) {
			c.Close()
		}
		return nil, err
	}
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return undo(fmt.Errorf("BPF run-time statistics: %w", err))
	}
	out = append(out, st)
	for i := range probes {
		// One program per probe: the kernel refuses the same program twice
		// on one tracepoint.
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: fmt.Sprintf("holdkeys%d", i), Type: ebpf.RawTracepoint, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		})
		if err != nil {
			return undo(fmt.Errorf("load: %w", err))
		}
		out = append(out, p)
		for _, n := range names {
			l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: n, Program: p})
			if err != nil {
				return undo(fmt.Errorf("attach to %s: %w", n, err))
			}
			out = append(out, l)
		}
	}
	return out, nil
}
