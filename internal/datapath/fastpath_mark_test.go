package datapath

import (
	"testing"

	"github.com/cilium/ebpf"
)

// fpFastMark is bpf/fastpath_guard.h's FP_FAST_MARK, in the skb's cb[0].
const fpFastMark = 0xfa57c0de

// cb0 is where skbCtx holds cb[0] (Pad1 starts at tc_index).
const cb0 = 1

// runCtx runs prog on pkt with ctx and returns its verdict and cb[0] after it.
func runCtx(t *testing.T, prog *ebpf.Program, pkt []byte, ctx skbCtx) (uint32, uint32) {
	t.Helper()
	var out skbCtx
	opts := &ebpf.RunOptions{Data: pkt, DataOut: make([]byte, len(pkt)+256), Context: ctx, ContextOut: &out}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, out.Pad1[cb0]
}

// noted is how many slow arrivals wait, over every CPU, for their NAPI
// poll to return.
func noted(t *testing.T, f *FastPath) uint32 {
	t.Helper()
	var rings []fastpathFpRing
	if err := f.objs.FpArrivals.Lookup(uint32(0), &rings); err != nil {
		t.Fatal(err)
	}
	var n uint32
	for _, r := range rings {
		n += r.N
	}
	return n
}

// inflightEg is the egress in-flight count of the one flow recorded.
func inflightEg(t *testing.T, f *FastPath) uint32 {
	t.Helper()
	p, ok := firstValue[fastpathFpPending](f.objs.FpPendEg)
	if !ok {
		t.Fatal("no egress record")
	}
	return p.Inflight
}

// TestFastPacketsAreNoArrivals: a fast packet passes the programs where
// the slow path ends (its container's tc ingress, its NIC's tc egress)
// while a packet of its flow can be in flight there, handed over by
// another CPU; counted as an arrival it opened the guard one packet early
// (TCP, whose sender runs on two CPUs, reordered under invalidations).
// The fast path marks what it delivers, and the ends count only the rest.
//
// guest: the fast path's helpers differ on 6.1
func TestFastPacketsAreNoArrivals(t *testing.T) {
	f := fastHarness(t)
	fl := fastFlow()
	delivered := frame(fl, pktOpts{payload: 16})
	learnIngress(t, f, fl, delivered)
	marked := skbCtx{}
	marked.Pad1[cb0] = fpFastMark
	wire := vxlanFrame(underlay4a, underlay4b, 4789, frame(fl, pktOpts{payload: 16}), pktOpts{})

	if ret, cb := runCtx(t, f.objs.FpathNicIn, wire, skbCtx{}); ret != tcActRedirect || cb != fpFastMark {
		t.Fatalf("a cached packet: verdict %d, cb[0] %#x; want redirect, marked", ret, cb)
	}
	if err := f.Invalidate(); err != nil {
		t.Fatal(err)
	}
	// Came marked from the sending host's fast path: the mark ends here.
	if ret, cb := runCtx(t, f.objs.FpathNicIn, wire, marked); ret != tcActUnspec || cb != 0 {
		t.Fatalf("a stale packet: verdict %d, cb[0] %#x; want passed on, unmarked", ret, cb)
	}
	n0 := noted(t, f) // the learning's own, no poll having run
	runCtx(t, f.objs.FpathPodIn, delivered, marked)
	if n := noted(t, f) - n0; n != 0 {
		t.Errorf("a fast packet at the container's end was noted as %d arrival(s)", n)
	}
	runCtx(t, f.objs.FpathPodIn, delivered, skbCtx{})
	if n := noted(t, f) - n0; n != 1 {
		t.Errorf("the slow packet at the container's end: %d arrivals noted, want 1", n)
	}

	inner := frame(fl, pktOpts{payload: 16})
	if ret, cb := runCtx(t, f.objs.FpathVethIn, inner, marked); ret != tcActUnspec || cb != 0 {
		t.Fatalf("an egress miss: verdict %d, cb[0] %#x; want passed on, unmarked", ret, cb)
	}
	built := vxlanFrame(underlay4b, underlay4a, 4789, inner, pktOpts{})
	runCtx(t, f.objs.FpathNicEg, built, marked)
	if n := inflightEg(t, f); n != 1 {
		t.Errorf("after a fast packet at the NIC's egress %d in flight, want the slow one's 1", n)
	}
	runCtx(t, f.objs.FpathNicEg, built, skbCtx{})
	if n := inflightEg(t, f); n != 0 {
		t.Errorf("after the slow packet at the NIC's egress %d in flight, want 0", n)
	}
	if ret, cb := runCtx(t, f.objs.FpathVethIn, inner, skbCtx{}); ret != tcActRedirect || cb != fpFastMark {
		t.Errorf("a cached egress packet: verdict %d, cb[0] %#x; want redirect, marked", ret, cb)
	}
}
