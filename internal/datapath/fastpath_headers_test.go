package datapath

import (
	"encoding/binary"
	"testing"
)

const (
	ecnECT0 = 0x02
	ecnCE   = 0x03
)

// innerFrame is f's frame with TOS and TTL given and a valid IP header
// checksum, so that what the fast path rewrites can be checked.
func innerFrame(f flowSpec, tos, ttl byte) []byte {
	b := frame(f, pktOpts{payload: 16, tos: tos})
	b[14+8] = ttl
	binary.BigEndian.PutUint16(b[14+10:], ipChecksum(b[14:34]))
	return b
}

// learnRouted teaches the ingress cache fl as a routed layout delivers it:
// one hop of TTL less.
func learnRouted(t *testing.T, f *FastPath, fl flowSpec, tos byte) {
	t.Helper()
	if ret, _ := runFast(t, f.objs.FpathNicIn, vxlanFrame(underlay4a, underlay4b, 4789, innerFrame(fl, tos, 64), pktOpts{})); ret != tcActUnspec {
		t.Fatalf("a miss at the NIC returned %d", ret)
	}
	delivered := innerFrame(fl, tos, 63)
	runFast(t, f.objs.FpathVethEg, delivered)
	arriveAll(t, f)
}

// TestFastIngressHeaders: on decapsulation the fast path does to the
// headers what the kernel would, or leaves the packet to it: a TTL routing
// would expire, outer headers ip_rcv or udp_rcv would refuse, CE over a
// Not-ECT inner (dropped) go to the slow path; CE over an ECN-capable
// inner marks it CE (RFC 6040).
//
// guest: the fast path's helpers differ on 6.1
func TestFastIngressHeaders(t *testing.T) {
	fl := fastFlow()
	outer := func(inner []byte, o pktOpts) []byte { return vxlanFrame(underlay4a, underlay4b, 4789, inner, o) }
	badSum := outer(innerFrame(fl, 0, 64), pktOpts{})
	badSum[14+10] ^= 0xff
	padded := append(outer(innerFrame(fl, 0, 64), pktOpts{}), 0, 0, 0, 0)
	udpLen := outer(innerFrame(fl, 0, 64), pktOpts{})
	binary.BigEndian.PutUint16(udpLen[14+20+4:], binary.BigEndian.Uint16(udpLen[14+20+4:])-4)
	binary.BigEndian.PutUint16(udpLen[14+10:], 0)
	binary.BigEndian.PutUint16(udpLen[14+10:], ipChecksum(udpLen[14:34]))
	unsummed := outer(innerFrame(fl, 0, 64), pktOpts{}) // inner UDP checksum 0
	binary.BigEndian.PutUint16(unsummed[14+20+6:], 0x1234)
	for _, c := range []struct {
		name string
		pkt  []byte
	}{
		{"ttl-1", outer(innerFrame(fl, 0, 1), pktOpts{})},
		{"ttl-0", outer(innerFrame(fl, 0, 0), pktOpts{})},
		{"ce-over-not-ect", outer(innerFrame(fl, 0, 64), pktOpts{tos: ecnCE})},
		{"outer-checksum", badSum},
		{"outer-ip-length", padded},
		{"outer-udp-length", udpLen},
		{"outer-checksum-only", unsummed},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			learnRouted(t, f, fl, 0)
			before, _ := f.Stats()
			if ret, _ := runFast(t, f.objs.FpathNicIn, c.pkt); ret != tcActUnspec {
				t.Fatalf("returned %d, want the packet passed to the slow path", ret)
			}
			if after, _ := f.Stats(); after.Counters["not_eligible"] != before.Counters["not_eligible"]+1 {
				t.Errorf("not_eligible %d -> %d, want one more", before.Counters["not_eligible"], after.Counters["not_eligible"])
			}
		})
	}
	t.Run("ce-over-ect", func(t *testing.T) {
		f := fastHarness(t)
		learnRouted(t, f, fl, ecnECT0)
		ret, out := runFast(t, f.objs.FpathNicIn, outer(innerFrame(fl, ecnECT0, 64), pktOpts{tos: ecnCE}))
		if ret != tcActRedirect {
			t.Fatalf("returned %d, want delivered", ret)
		}
		if ip := out[14:34]; ip[1] != ecnCE || ip[8] != 63 || ipChecksum(ip) != 0 {
			t.Errorf("delivered TOS %#x TTL %d (checksum verifies: %v), want CE, 63 and a valid checksum", ip[1], ip[8], ipChecksum(ip) == 0)
		}
	})
	t.Run("outer-and-inner-checksums", func(t *testing.T) {
		f := fastHarness(t)
		learnRouted(t, f, fl, 0)
		pkt := outer(withL4Checksum(innerFrame(fl, 0, 64)), pktOpts{})
		binary.BigEndian.PutUint16(pkt[14+20+6:], 0x1234)
		if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); ret != tcActRedirect {
			t.Errorf("returned %d, want delivered: the inner UDP checksum verifies what the outer would", ret)
		}
	})
	t.Run("ttl-2", func(t *testing.T) {
		f := fastHarness(t)
		learnRouted(t, f, fl, 0)
		if ret, out := runFast(t, f.objs.FpathNicIn, outer(innerFrame(fl, 0, 2), pktOpts{})); ret != tcActRedirect || out[14+8] != 1 {
			t.Errorf("returned %d with TTL %d, want delivered with TTL 1", ret, out[14+8])
		}
	})
}

// TestFastEgressHeaders: the learned outer headers are put only on
// packets they are right for, as the VXLAN device would build them: the
// outer ECN from the packet's own (ip_tunnel_ecn_encap); a TTL routing
// would expire, another TTL or DSCP than the learned packet's (which a
// 'ttl/tos inherit' device copies), GSO segments too big for the NIC go to
// the slow path.
//
// guest: the fast path's helpers differ on 6.1
func TestFastEgressHeaders(t *testing.T) {
	fl := fastFlow()
	learn := func(f *FastPath) {
		runFast(t, f.objs.FpathVethIn, innerFrame(fl, 0, 64))
		runFast(t, f.objs.FpathNicEg, vxlanFrame(underlay4b, underlay4a, 4789, innerFrame(fl, 0, 63), pktOpts{}))
	}
	for _, c := range []struct {
		name string
		pkt  []byte
		ctx  skbCtx
	}{
		{"ttl-1", innerFrame(fl, 0, 1), skbCtx{}},
		{"ttl-0", innerFrame(fl, 0, 0), skbCtx{}},
		{"other-dscp", innerFrame(fl, 0xb8, 64), skbCtx{}},
		// lo, the NIC here, has an MTU of 65536.
		{"gso-too-big", innerFrame(fl, 0, 64), skbCtx{GSOSegs: 2, GSOSize: 65500}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			learn(f)
			if ret, _ := runFastOn(t, f.objs.FpathVethIn, c.pkt, c.ctx); ret != tcActUnspec {
				t.Fatalf("returned %d, want the packet passed to the slow path", ret)
			}
		})
	}
	for _, c := range []struct {
		name           string
		inner, outerTo byte
	}{
		{"not-ect", 0, 0}, {"ect0", ecnECT0, ecnECT0}, {"ect1", 1, 1}, {"ce", ecnCE, ecnECT0},
		// (A GSO packet that fits is not among them: BPF_PROG_TEST_RUN
		// cannot give it the GSO type bpf_skb_adjust_room wants.)
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			learn(f)
			ret, out := runFast(t, f.objs.FpathVethIn, innerFrame(fl, c.inner, 64))
			if ret != tcActRedirect {
				t.Fatalf("returned %d, want sent", ret)
			}
			if ip := out[14:34]; ip[1] != c.outerTo || ipChecksum(ip) != 0 || out[64+8] != 63 {
				t.Errorf("outer TOS %#x (checksum verifies: %v), inner TTL %d, want %#x and 63", ip[1], ipChecksum(ip) == 0, out[64+8], c.outerTo)
			}
		})
	}
}
