package datapath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/lab/labtest"
)

const tcActRedirect = 7

// fastHarness loads the fast path with VXLAN port 4789, trusted for a
// minute, for BPF_PROG_TEST_RUN (whose packets come in on lo, ifindex 1).
func fastHarness(t testing.TB) *FastPath {
	t.Helper()
	labtest.NeedRoot(t)
	if err := FastPathSupported(); err != nil {
		t.Skip(err)
	}
	f, err := NewFastPath([]int{4789})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Renew(time.Minute); err != nil {
		t.Fatal(err)
	}
	return f
}

// runFast runs prog on pkt and returns its verdict and the packet after it.
func runFast(t *testing.T, prog *ebpf.Program, pkt []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

var (
	podA = netip.MustParseAddr("10.0.1.2")
	podB = netip.MustParseAddr("10.0.1.102")
	// spoofer is an outer source the entry did not learn.
	spoofer = netip.MustParseAddr("192.0.2.9")
)

func fastFlow() flowSpec {
	return flowSpec{proto: protoUDP, src: podA, dst: podB, sport: 40000, dport: 5201}
}

// learnIngress teaches the ingress cache f's flow as the slow path would:
// the NIC hands a packet to the slow path, and it arrives at the
// container's host-side veth (egress) with the Ethernet header given.
func learnIngress(t *testing.T, f *FastPath, fl flowSpec, delivered []byte) {
	t.Helper()
	if ret, _ := runFast(t, f.objs.FpathNicIn, vxlanFrame(underlay4a, underlay4b, 4789, frame(fl, pktOpts{payload: 16}), pktOpts{})); ret != tcActUnspec {
		t.Fatalf("a miss at the NIC returned %d, want to pass it on", ret)
	}
	runFast(t, f.objs.FpathVethEg, delivered)
	runFast(t, f.objs.FpathPodIn, delivered)
	arriveAll(t, f)
}

// arriveAll counts every slow packet in flight as arrived, as the guard
// does when the NAPI poll that delivered them returns (no poll runs for
// BPF_PROG_TEST_RUN).
func arriveAll(t *testing.T, f *FastPath) {
	t.Helper()
	drainPending(t, f.objs.FpPendIn)
}

// guest: the fast path's helpers differ on 6.1
func TestFastIngressLearnsAndDelivers(t *testing.T) {
	f := fastHarness(t)
	fl := fastFlow()
	delivered := frame(fl, pktOpts{payload: 16})
	copy(delivered, []byte{0x0a, 1, 2, 3, 4, 5, 0x0a, 6, 7, 8, 9, 10}) // the MACs the bridge chose
	learnIngress(t, f, fl, delivered)

	pkt := vxlanFrame(underlay4a, underlay4b, 4789, frame(fl, pktOpts{payload: 16}), pktOpts{})
	ret, out := runFast(t, f.objs.FpathNicIn, pkt)
	if ret != tcActRedirect {
		t.Fatalf("a cached packet returned %d, want redirect (%d)", ret, tcActRedirect)
	}
	if !bytes.Equal(out, delivered) {
		t.Errorf("delivered\n%x\nwant what the slow path delivered\n%x", out, delivered)
	}
	st, err := f.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["ingress_hit"] != 1 || st.Counters["ingress_learned"] != 1 || st.IngressEntries != 1 {
		t.Errorf("stats %+v: want 1 hit, 1 learned, 1 entry", st)
	}
}

// TestFastSpoofed: a packet that differs from what the entry learned in
// VNI, outer source, outer destination, inner source or destination, or
// comes after an invalidation, after the agent stopped renewing, as a TCP
// control segment or while the flow's slow packets are in flight, is never
// delivered by the fast path.
//
// guest: the fast path's helpers differ on 6.1
func TestFastSpoofed(t *testing.T) {
	fl := fastFlow()
	inner := func(f flowSpec) []byte { return frame(f, pktOpts{payload: 16}) }
	otherSrc, otherDst := fl, fl
	otherSrc.src = netip.MustParseAddr("10.0.1.66")
	otherDst.dst = netip.MustParseAddr("10.0.1.77")
	wrongVNI := vxlanFrame(underlay4a, underlay4b, 4789, inner(fl), pktOpts{})
	wrongVNI[14+20+8+6] = 43
	syn := fl
	syn.proto = protoTCP
	cases := []struct {
		name   string
		pkt    []byte
		before func(f *FastPath)
		reason string
	}{
		{"vni", wrongVNI, nil, "spoofed"},
		{"outer-source", vxlanFrame(spoofer, underlay4b, 4789, inner(fl), pktOpts{}), nil, "spoofed"},
		{"outer-destination", vxlanFrame(underlay4a, spoofer, 4789, inner(fl), pktOpts{}), nil, "spoofed"},
		{"inner-source", vxlanFrame(underlay4a, underlay4b, 4789, inner(otherSrc), pktOpts{}), nil, "ingress_miss"},
		{"inner-destination", vxlanFrame(underlay4a, underlay4b, 4789, inner(otherDst), pktOpts{}), nil, "ingress_miss"},
		{"invalidated", vxlanFrame(underlay4a, underlay4b, 4789, inner(fl), pktOpts{}), func(f *FastPath) { f.Invalidate() }, "stale"},
		{"agent-gone", vxlanFrame(underlay4a, underlay4b, 4789, inner(fl), pktOpts{}), func(f *FastPath) { f.Renew(-time.Second) }, ""},
		{"in-flight", vxlanFrame(underlay4a, underlay4b, 4789, inner(fl), pktOpts{}), func(f *FastPath) {
			// The flow's next packet is on the slow path (a GRO
			// aggregate: it went there) and has not arrived.
			runFastOn(t, f.objs.FpathNicIn, vxlanFrame(underlay4a, underlay4b, 4789, inner(fl), pktOpts{}), skbCtx{GSOSegs: 2, GSOSize: 16})
		}, "guard_wait"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			learnIngress(t, f, fl, inner(fl))
			if c.before != nil {
				c.before(f)
			}
			before, _ := f.Stats()
			if ret, _ := runFast(t, f.objs.FpathNicIn, c.pkt); ret != tcActUnspec {
				t.Fatalf("returned %d, want the packet passed to the slow path", ret)
			}
			after, _ := f.Stats()
			if after.Counters["ingress_hit"] != before.Counters["ingress_hit"] {
				t.Error("counted as a hit")
			}
			if c.reason != "" && after.Counters[c.reason] != before.Counters[c.reason]+1 {
				t.Errorf("%s: %d -> %d, want one more", c.reason, before.Counters[c.reason], after.Counters[c.reason])
			}
			// Another identity ends the entry: had it learned a forger's,
			// the flow's own packets would end it.
			if c.reason == "spoofed" && after.IngressEntries != 0 {
				t.Errorf("%d entries after a spoofed packet, want it dropped", after.IngressEntries)
			}
		})
	}
	t.Run("tcp-syn", func(t *testing.T) {
		f := fastHarness(t)
		learnIngress(t, f, syn, inner(syn))
		pkt := vxlanFrame(underlay4a, underlay4b, 4789, inner(syn), pktOpts{})
		pkt[len(pkt)-16-20+13] = 0x02 // SYN
		if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); ret != tcActUnspec {
			t.Fatalf("a SYN returned %d, want the slow path", ret)
		}
	})
}

// TestFastChangedNotCached: a flow whose packets the slow path changed
// beyond one hop of TTL (here DSCP) is never cached.
//
// guest: the fast path's helpers differ on 6.1
func TestFastChangedNotCached(t *testing.T) {
	f := fastHarness(t)
	fl := fastFlow()
	delivered := frame(fl, pktOpts{payload: 16})
	delivered[14+1] = 0xb8 // DSCP EF, set by a rule on the way
	learnIngress(t, f, fl, delivered)
	st, _ := f.Stats()
	if st.IngressEntries != 0 || st.Counters["changed_by_slow_path"] != 1 {
		t.Errorf("stats %+v: want no entry and one changed", st)
	}
}

// TestFastEgressEncapsulates: the egress cache learns the outer headers
// the VXLAN device built and puts them on the flow's next packets, with
// their own lengths and a valid header checksum.
//
// guest: the fast path's helpers differ on 6.1
func TestFastEgressEncapsulates(t *testing.T) {
	f := fastHarness(t)
	fl := fastFlow()
	pkt := frame(fl, pktOpts{payload: 16})
	if ret, _ := runFast(t, f.objs.FpathVethIn, pkt); ret != tcActUnspec {
		t.Fatalf("a miss returned %d", ret)
	}
	built := vxlanFrame(underlay4b, underlay4a, 4789, pkt, pktOpts{})
	runFast(t, f.objs.FpathNicEg, built)

	big := frame(fl, pktOpts{payload: 400})
	ret, out := runFast(t, f.objs.FpathVethIn, big)
	if ret != tcActRedirect {
		t.Fatalf("a cached packet returned %d, want redirect", ret)
	}
	want := vxlanFrame(underlay4b, underlay4a, 4789, big, pktOpts{})
	if len(out) != len(want) {
		t.Fatalf("encapsulated to %d bytes, want %d", len(out), len(want))
	}
	ip := out[14:34]
	if got := binary.BigEndian.Uint16(ip[2:]); got != uint16(len(want)-14) {
		t.Errorf("outer IP length %d, want %d", got, len(want)-14)
	}
	if ipChecksum(ip) != 0 {
		t.Errorf("outer IP header checksum does not verify: %x", ip)
	}
	// Apart from the IP ID and checksum (per packet), byte for byte what
	// the device would have built.
	for _, r := range [][2]int{{0, 18}, {20, 24}, {26, len(want)}} {
		if !bytes.Equal(out[r[0]:r[1]], want[r[0]:r[1]]) {
			t.Errorf("bytes %d-%d: %x, want %x", r[0], r[1], out[r[0]:r[1]], want[r[0]:r[1]])
		}
	}
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// TestFastProgramStats: the fast path's programs are among those whose cost
// ReadProgramStats reports (falcon-lab bench --bpf-stats), since they are
// what falcon's default runs on every packet.
func TestFastProgramStats(t *testing.T) {
	f := fastHarness(t)
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Skipf("BPF run-time statistics: %v", err)
	}
	defer st.Close()
	pkt := vxlanFrame(underlay4a, underlay4b, 4789, frame(fastFlow(), pktOpts{payload: 16}), pktOpts{})
	runFast(t, f.objs.FpathNicIn, pkt)
	all, err := ReadProgramStats()
	if err != nil {
		t.Fatal(err)
	}
	if s := all[fastpathProgFpathNicIn]; s.RunCount == 0 {
		t.Errorf("ReadProgramStats has no runs of %s: %+v", fastpathProgFpathNicIn, all)
	}
}
