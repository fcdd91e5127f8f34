package datapath

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/steer"
	"github.com/falconnet/falcon/lab/labtest"
)

const tcActUnspec = 0xffffffff // TC_ACT_UNSPEC as the program's u32 return

// harness runs the program with BPF_PROG_TEST_RUN, one instance per role,
// with debug on so each run records its decision in falcon_debug.
type harness struct {
	t     *testing.T
	d     *Datapath
	progs map[HookRole]*ebpf.Program
	hooks map[HookRole]Hook
	ids   map[HookRole]uint32
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	return newHarnessDebug(t, cfg, true)
}

// newHarnessDebug with debug false loads the programs as production does
// (run and tryRun then cannot see decisions).
func newHarnessDebug(t *testing.T, cfg Config, debug bool) *harness {
	t.Helper()
	labtest.NeedRoot(t)
	d, err := Load(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	d.debug = debug
	d.clock = func() uint64 { return 0 } // attach time unknown: no flow is taken to predate a hook
	h := &harness{t: t, d: d, progs: map[HookRole]*ebpf.Program{}, hooks: map[HookRole]Hook{}, ids: map[HookRole]uint32{}}
	t.Cleanup(func() {
		for _, p := range h.progs {
			p.Close()
		}
		d.Close()
	})
	h.addHook(Hook{Ifindex: 1, Name: "lo", Role: HookOnNIC, NextIfindex: 7})
	h.addHook(Hook{Ifindex: 1, Name: "lo", Role: HookOnOverlay, NextIfindex: 9})
	return h
}

// addHook loads an instance for hook without attaching it anywhere.
func (h *harness) addHook(hook Hook) {
	h.t.Helper()
	d := h.d
	id, err := d.allocID()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := d.resetSlot(id); err != nil {
		h.t.Fatal(err)
	}
	p, err := d.program(id)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := d.writeHook(id, hook, true); err != nil {
		h.t.Fatal(err)
	}
	h.progs[hook.Role] = p
	h.hooks[hook.Role] = hook
	h.ids[hook.Role] = id
}

func (h *harness) setSalt(role HookRole, next int) {
	h.t.Helper()
	hook := h.hooks[role]
	hook.NextIfindex = next
	h.hooks[role] = hook
	if err := h.d.writeHook(h.ids[role], hook, true); err != nil {
		h.t.Fatal(err)
	}
}

type result struct {
	ret uint32
	dbg falconDebug
	cpu int // where the program ran
}

func (r result) steered() bool { return r.dbg.Kind != 0 }

func (h *harness) debugs() []falconDebug {
	h.t.Helper()
	var v []falconDebug
	if err := h.d.maps.FalconDebug.Lookup(uint32(0), &v); err != nil {
		h.t.Fatal(err)
	}
	return v
}

func (h *harness) run(role HookRole, pkt []byte) result {
	h.t.Helper()
	r, ok := h.tryRun(role, pkt)
	if !ok {
		h.t.Fatalf("test run refused a %d-byte packet", len(pkt))
	}
	return r
}

// tryRun is run for packets BPF_PROG_TEST_RUN may refuse: since about 6.16
// it rejects frames whose ethertype is IPv4 or IPv6 but that are too short
// for the IP header (34 and 54 bytes), so those lengths cannot be tested.
func (h *harness) tryRun(role HookRole, pkt []byte) (result, bool) {
	h.t.Helper()
	before := h.debugs()
	ret, err := h.progs[role].Run(&ebpf.RunOptions{Data: pkt})
	if errors.Is(err, unix.EINVAL) && shortL3(pkt) {
		return result{}, false
	}
	if err != nil {
		h.t.Fatalf("test run (%d bytes): %v", len(pkt), err)
	}
	after := h.debugs()
	for cpu := range after {
		if after[cpu].Seq != before[cpu].Seq {
			return result{ret: ret, dbg: after[cpu], cpu: cpu}, true
		}
	}
	h.t.Fatal("the program recorded no decision")
	return result{}, false
}

func shortL3(pkt []byte) bool {
	switch uint16(pkt[12])<<8 | uint16(pkt[13]) {
	case 0x0800:
		return len(pkt) < 14+20
	case 0x86dd:
		return len(pkt) < 14+40
	}
	return false
}

func (h *harness) setLoad(perCPU []uint32, avg uint32, fresh bool) {
	h.t.Helper()
	var now uint64
	if fresh {
		now = monotonicNs(h.t)
	}
	if err := h.d.SetLoad(perCPU, avg, now); err != nil {
		h.t.Fatal(err)
	}
}

func monotonicNs(t *testing.T) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// checkSteer asserts a steered result agrees with the Go twin.
func (h *harness) checkSteer(name string, r result, role HookRole, fh uint32, load []uint32, avg uint32, stale bool) {
	h.t.Helper()
	cfg := h.d.Config()
	cpus := cfg.SortedCPUs()
	if r.ret != tcActUnspec {
		h.t.Errorf("%s: verdict %#x, want TC_ACT_UNSPEC", name, r.ret)
	}
	if !r.steered() {
		h.t.Errorf("%s: passed untouched, want steered", name)
		return
	}
	if r.dbg.Flowhash != fh {
		h.t.Errorf("%s: flow hash %#x, want %#x", name, r.dbg.Flowhash, fh)
	}
	cpu, kind := steer.ChooseVariant(fh, uint32(h.hooks[role].NextIfindex), cpus, load, uint32(cfg.Threshold), avg, stale, variantOf(cfg))
	wantHash := uint32(0)
	if kind == steer.Fallback {
		cpu = r.cpu
		if i := indexOf(cpus, cpu); cfg.Fallback == FallbackLocal && i >= 0 {
			wantHash = steer.SteerHash(fh, i, len(cpus))
		}
	} else {
		wantHash = steer.SteerHash(fh, indexOf(cpus, cpu), len(cpus))
		if got := steer.RPSCPU(r.dbg.SetHash, cpus); got != cpu {
			h.t.Errorf("%s: hash %#x makes RPS pick CPU %d, want %d", name, r.dbg.SetHash, got, cpu)
		}
	}
	if steer.Kind(r.dbg.Kind) != kind || int(r.dbg.Target) != cpu || r.dbg.SetHash != wantHash {
		h.t.Errorf("%s: BPF chose CPU %d (%v) hash %#x; twin: CPU %d (%v) hash %#x",
			name, r.dbg.Target, steer.Kind(r.dbg.Kind), r.dbg.SetHash, cpu, kind, wantHash)
	}
	if r.dbg.SkbHash != r.dbg.SetHash {
		h.t.Errorf("%s: skb->hash %#x after bpf_set_hash(%#x)", name, r.dbg.SkbHash, r.dbg.SetHash)
	}
}

// variantOf is the twin's name for cfg's policy variant.
func variantOf(cfg Config) steer.Variant {
	return steer.Variant{Static: cfg.Policy == PolicyStatic, AlwaysOn: cfg.AlwaysOn}
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
