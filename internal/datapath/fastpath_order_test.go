package datapath

import (
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// pinnedThread locks the test's goroutine to its thread and returns what
// moves that thread to one CPU; the thread's affinity is restored and the
// lock undone when the test ends (cleanups run on the test's goroutine).
func pinnedThread(t *testing.T) func(cpu int) {
	t.Helper()
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	})
	return func(cpu int) {
		t.Helper()
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Fatal(err)
		}
	}
}

// firstValue is the value of m's first entry (the one flow a test made).
func firstValue[V any](m *ebpf.Map) (V, bool) {
	var (
		k fastpathFpKey
		v V
	)
	return v, m.Iterate().Next(&k, &v)
}

// homeOf is the home CPU recorded for the one flow of f's sender order.
func homeOf(t *testing.T, f *FastPath) (uint32, bool) {
	t.Helper()
	h, ok := firstValue[fastpathFpHome](f.objs.FpHomes)
	return h.Cpu, ok
}

// TestSenderOrderHome: a flow's data waits on the backlog of the CPU that
// sent its first data, whichever CPU sends the next (the TCP sender's ACK
// CPU); a FIN follows its data there; a pure ACK has nothing to overtake
// and stays where it was sent; and with no RPS map given the program
// leaves every packet alone. (That RPS picks the CPU the hash names is
// steer_hash's, checked with steering against internal/steer's twin.)
func TestSenderOrderHome(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	f := fastHarness(t)
	onCPU := pinnedThread(t)

	fl := fastFlow()
	fl.proto = protoTCP
	const flags = 14 + 20 + 13 // Ethernet, IPv4, TCP's flags byte
	data, ack, fin := frame(fl, pktOpts{payload: 100}), frame(fl, pktOpts{}), frame(fl, pktOpts{})
	data[flags], ack[flags], fin[flags] = 0x18, 0x10, 0x11
	moved := func() uint64 {
		s, err := f.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s.Counters["send_moved"]
	}

	onCPU(1)
	runFast(t, f.objs.FpathPodEg, data)
	if _, ok := homeOf(t, f); ok {
		t.Fatal("no RPS map given, yet a home was recorded")
	}
	if err := f.SetSenderOrder([]int{1, 0, 1}); err != nil {
		t.Fatal(err)
	}
	if f.cfg.SendN != 2 || f.cfg.SendPos[0] != 1 || f.cfg.SendPos[1] != 2 {
		t.Fatalf("RPS map of {1, 0, 1}: n %d, pos %v; want 2 CPUs, 0 then 1", f.cfg.SendN, f.cfg.SendPos[:2])
	}
	onCPU(0)
	runFast(t, f.objs.FpathPodEg, ack) // before any data: no home
	if _, ok := homeOf(t, f); ok {
		t.Fatal("a pure ACK gave the flow a home")
	}
	runFast(t, f.objs.FpathPodEg, data)
	if home, ok := homeOf(t, f); !ok || home != 0 {
		t.Fatalf("home after the first data, sent on CPU 0: %d (recorded %v)", home, ok)
	}
	onCPU(1)
	for _, c := range []struct {
		name  string
		pkt   []byte
		moved uint64
	}{{"data", data, 1}, {"pure ACK", ack, 1}, {"FIN", fin, 2}} {
		runFast(t, f.objs.FpathPodEg, c.pkt)
		if got := moved(); got != c.moved {
			t.Errorf("%s sent on CPU 1: %d moved to the home's backlog in all, want %d", c.name, got, c.moved)
		}
	}
	if home, _ := homeOf(t, f); home != 0 {
		t.Errorf("home moved to %d while the flow kept sending", home)
	}
	if err := f.SetSenderOrder([]int{len(f.cfg.SendPos)}); err == nil {
		t.Error("a CPU past MAX_CPUS was taken")
	}
}
