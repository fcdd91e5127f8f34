package datapath

import (
	"net"
	"testing"

	"github.com/cilium/ebpf"
)

// skbCtx is struct __sk_buff as BPF_PROG_TEST_RUN takes it, with the
// fields the fast path's tests set: the device the packet is on (ifindex,
// an existing one) and GSO.
type skbCtx struct {
	Pad0    [10]uint32 // len … ingress_ifindex
	Ifindex uint32
	Pad1    [25]uint32 // tc_index … data_meta
	Pad2    [2]uint64  // flow_keys, tstamp
	WireLen uint32
	GSOSegs uint32
	Sk      uint64
	GSOSize uint32
	Pad3    uint32
	HwTstmp uint64
}

// runFastOn runs prog on pkt as if it were on the device ctx names.
func runFastOn(t *testing.T, prog *ebpf.Program, pkt []byte, ctx skbCtx) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Context: ctx}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

// otherDevice is a device of the test's namespace other than lo, for a
// packet that comes from a second container's veth.
func otherDevice(t *testing.T) uint32 {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Index > 1 {
			return uint32(i.Index)
		}
	}
	t.Skip("needs a device other than lo in the test's namespace")
	return 0
}

// drainPending counts every packet in flight on the slow path as gone, as
// the guard does a second after the flow's last slow packet (a dropped
// packet never arrives).
func drainPending(t *testing.T, m *ebpf.Map) {
	t.Helper()
	var (
		k fastpathFpKey
		p fastpathFpPending
	)
	it := m.Iterate()
	for it.Next(&k, &p) {
		p.Inflight = 0
		if err := m.Put(&k, &p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFastIdentityPoisoning: a forged packet the slow path drops, sent
// before a flow starts (a wrong VNI, an outer source the host refuses, a
// container using another's address), does not make the flow's legitimate
// packets teach the cache the forger's identity: the forger's packets are
// never delivered by the fast path, and the flow is learned as it really
// comes once the forged packet's life is over.
//
// guest: the fast path's helpers differ on 6.1
func TestFastIdentityPoisoning(t *testing.T) {
	fl := fastFlow()
	inner := frame(fl, pktOpts{payload: 16})
	legit := vxlanFrame(underlay4a, underlay4b, 4789, inner, pktOpts{})
	wrongVNI := vxlanFrame(underlay4a, underlay4b, 4789, inner, pktOpts{})
	wrongVNI[14+20+8+6] = 43
	for _, c := range []struct {
		name   string
		forged []byte
	}{
		{"ingress-vni", wrongVNI},
		{"ingress-remote", vxlanFrame(spoofer, underlay4b, 4789, inner, pktOpts{})},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			runFast(t, f.objs.FpathNicIn, c.forged) // the slow path drops it
			learnIngress(t, f, fl, inner)
			if ret, _ := runFast(t, f.objs.FpathNicIn, c.forged); ret == tcActRedirect {
				t.Fatal("the forged identity was learned: its packet was delivered by the fast path")
			}
			arriveAll(t, f) // the guard gives up on the dropped ones
			learnIngress(t, f, fl, inner)
			if ret, _ := runFast(t, f.objs.FpathNicIn, legit); ret != tcActRedirect {
				t.Errorf("the flow's own packet returned %d once the forged one was gone, want it cached", ret)
			}
			before, _ := f.Stats()
			if ret, _ := runFast(t, f.objs.FpathNicIn, c.forged); ret == tcActRedirect {
				t.Error("a forged packet of the cached flow was delivered")
			}
			if after, _ := f.Stats(); after.Counters["spoofed"] != before.Counters["spoofed"]+1 {
				t.Errorf("spoofed %d -> %d, want one more", before.Counters["spoofed"], after.Counters["spoofed"])
			}
		})
	}
	t.Run("egress-other-container", func(t *testing.T) {
		f := fastHarness(t)
		victim, attacker := skbCtx{Ifindex: 1}, skbCtx{Ifindex: otherDevice(t)}
		built := vxlanFrame(underlay4b, underlay4a, 4789, inner, pktOpts{})
		learn := func() {
			runFastOn(t, f.objs.FpathVethIn, inner, victim)
			runFast(t, f.objs.FpathNicEg, built)
		}
		runFastOn(t, f.objs.FpathVethIn, inner, attacker) // netfilter drops it
		learn()
		drainPending(t, f.objs.FpPendEg) // the guard gives up on the dropped one
		if ret, _ := runFastOn(t, f.objs.FpathVethIn, inner, attacker); ret == tcActRedirect {
			t.Fatal("the other container's veth was learned: its packet was sent by the fast path")
		}
		drainPending(t, f.objs.FpPendEg)
		learn()
		if ret, _ := runFastOn(t, f.objs.FpathVethIn, inner, victim); ret != tcActRedirect {
			t.Errorf("the flow's own packet returned %d once the forged one was gone, want it cached", ret)
		}
		if ret, _ := runFastOn(t, f.objs.FpathVethIn, inner, attacker); ret == tcActRedirect {
			t.Error("the other container's packet of the cached flow was sent")
		}
	})
}
