package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// FastFlow is a cached flow's inner 5-tuple, ports in host order.
type FastFlow struct {
	Src, Dst     netip.Addr
	Sport, Dport uint16
	Proto        uint8
}

// FastDir says which cache an entry is in: FastIngress (the NIC to a
// container) or FastEgress (a container to the NIC).
type FastDir uint32

const (
	FastIngress FastDir = 0 // FP_DIR_IN
	FastEgress  FastDir = 1 // FP_DIR_EG
)

// FastEntry is what the conntrack keeper needs of a cached entry.
type FastEntry struct {
	Dir  FastDir
	Flow FastFlow
	Gen  uint32
	// Used is when a packet last used it (CLOCK_MONOTONIC, to the second).
	Used time.Duration
	// Kept: conntrack has been kept in step with it (FP_CT_KEPT).
	Kept bool
}

func flowOf(k fastpathFpKey) FastFlow {
	var s, d [4]byte
	binary.NativeEndian.PutUint32(s[:], k.Saddr)
	binary.NativeEndian.PutUint32(d[:], k.Daddr)
	return FastFlow{
		Src: netip.AddrFrom4(s), Dst: netip.AddrFrom4(d), Proto: k.Proto,
		Sport: swap16(k.Sport), Dport: swap16(k.Dport),
	}
}

func keyOf(f FastFlow) fastpathFpKey {
	s, d := f.Src.As4(), f.Dst.As4()
	return fastpathFpKey{
		Saddr: binary.NativeEndian.Uint32(s[:]), Daddr: binary.NativeEndian.Uint32(d[:]),
		Sport: swap16(f.Sport), Dport: swap16(f.Dport), Proto: f.Proto,
	}
}

// FastClock is the programs' clock now (CLOCK_MONOTONIC; they read its
// coarse form, at most a tick behind), to compare with FastEntry.Used.
func FastClock() time.Duration { return time.Duration(monotonicNow()) }

// swap16 turns a port between the wire's order (as the map keys hold it)
// and the host's.
func swap16(v uint16) uint16 { return v<<8 | v>>8 }

// fp_config.ct_gate's bits (enum fp_ct_gate in bpf/fastpath.h).
const (
	ctGateTCP = 1
	ctGateAll = 2
)

// SetConntrack tells the programs whether the host tracks connections
// (gate: TCP entries then wait until Keep) and how long an entry may go
// unused before it is dropped (0: no bound).
func (f *FastPath) SetConntrack(gate bool, idle time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.CtGate &= ctGateAll
	if gate {
		f.cfg.CtGate |= ctGateTCP
	}
	f.cfg.IdleNs = uint64(idle)
	return f.objs.FpConf.Put(uint32(0), f.cfg)
}

// SetEstablishedOnly has every entry learned from now on wait until Keep,
// UDP's too, not TCP's alone: for a host whose rules decide the packets of
// connections not yet established per packet (docs/fastpath.md#policy).
// Set it while the programs are off and their caches stale, so no entry
// learned before it is used.
func (f *FastPath) SetEstablishedOnly(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.CtGate &^= ctGateAll
	if on {
		f.cfg.CtGate |= ctGateAll
	}
	return f.objs.FpConf.Put(uint32(0), f.cfg)
}

// ConntrackRequests reads the learning points' requests: entries learned
// waiting for Keep. Close the reader to stop; Close of the fast path does
// too.
func (f *FastPath) ConntrackRequests() (*ringbuf.Reader, error) {
	return ringbuf.NewReader(f.objs.FpCtq)
}

// ParseConntrackRequest decodes one record of ConntrackRequests.
func ParseConntrackRequest(raw []byte) (FastDir, FastFlow, uint32, error) {
	var ev fastpathFpCtEvent
	if len(raw) < binary.Size(ev) {
		return 0, FastFlow{}, 0, fmt.Errorf("fast path: conntrack request of %d bytes", len(raw))
	}
	if _, err := binary.Decode(raw, binary.NativeEndian, &ev); err != nil {
		return 0, FastFlow{}, 0, err
	}
	return FastDir(ev.Dir), flowOf(ev.K), ev.Gen, nil
}

// Entries calls fn for every entry of the current generation, both ways.
func (f *FastPath) Entries(fn func(FastEntry)) error {
	gen := f.Generation()
	err := eachEntry(f.objs.FpIn, func(k *fastpathFpKey, in *fastpathFpIngress) {
		if in.Gen == gen {
			fn(FastEntry{Dir: FastIngress, Flow: flowOf(*k), Gen: in.Gen, Used: time.Duration(in.UsedNs), Kept: in.Ct == 1})
		}
	})
	return errors.Join(err, eachEntry(f.objs.FpEg, func(k *fastpathFpKey, eg *fastpathFpEgress) {
		if eg.Gen == gen {
			fn(FastEntry{Dir: FastEgress, Flow: flowOf(*k), Gen: eg.Gen, Used: time.Duration(eg.UsedNs), Kept: eg.Ct == 1})
		}
	}))
}

// Keep lets the programs use the entry of flow in dir learned under gen:
// the caller has kept conntrack in step with it. An entry relearned since
// (another generation) is left waiting.
func (f *FastPath) Keep(dir FastDir, flow FastFlow, gen uint32) error {
	k := keyOf(flow)
	switch dir {
	case FastIngress:
		return keep(f.objs.FpIn, k, gen, func(v *fastpathFpIngress) (uint32, *uint8) { return v.Gen, &v.Ct })
	case FastEgress:
		return keep(f.objs.FpEg, k, gen, func(v *fastpathFpEgress) (uint32, *uint8) { return v.Gen, &v.Ct })
	}
	return fmt.Errorf("fast path: no cache %d", dir)
}

func keep[V any](m *ebpf.Map, k fastpathFpKey, gen uint32, fields func(*V) (uint32, *uint8)) error {
	var v V
	if err := m.Lookup(&k, &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		return err
	}
	g, ct := fields(&v)
	if g != gen || *ct == 1 {
		return nil
	}
	*ct = 1
	err := m.Update(&k, &v, ebpf.UpdateExist)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// Forget drops the cached entries of a connection, both ways (flow and its
// reverse, in both caches): its next packets take the slow path.
func (f *FastPath) Forget(flow FastFlow) {
	rev := FastFlow{Src: flow.Dst, Dst: flow.Src, Sport: flow.Dport, Dport: flow.Sport, Proto: flow.Proto}
	for _, fl := range []FastFlow{flow, rev} {
		k := keyOf(fl)
		f.objs.FpIn.Delete(&k)
		f.objs.FpEg.Delete(&k)
	}
}
