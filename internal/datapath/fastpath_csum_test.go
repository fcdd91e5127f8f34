package datapath

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// withL4Checksum sets the L4 checksum of an Ethernet/IPv4 frame (no IP
// options), as a sender whose checksum is complete would have.
func withL4Checksum(b []byte) []byte {
	ip := b[14:]
	l4 := ip[20:binary.BigEndian.Uint16(ip[2:])]
	at := 16 // TCP
	if ip[9] == protoUDP {
		at = 6
	}
	binary.BigEndian.PutUint16(l4[at:], 0)
	binary.BigEndian.PutUint16(l4[at:], l4Checksum(ip, l4))
	return b
}

// l4Checksum is the Internet checksum of an IPv4 packet's L4 segment with
// its pseudo header (0 when the segment's own checksum is right).
func l4Checksum(ip, l4 []byte) uint16 {
	ph := append(append([]byte{}, ip[12:20]...), 0, ip[9], byte(len(l4)>>8), byte(len(l4)))
	return ipChecksum(append(ph, l4...))
}

// TestFastEgressOuterChecksum: where the slow path sent the learned packet
// with an outer UDP checksum (the VXLAN device's udpcsum, on by default),
// the fast path sends its packets with one that verifies over the whole
// packet, also after a routed layout's TTL change: a receiver's GRO merges
// only packets that agree on having one, and two flows there reorder at a
// switch between the paths. An aggregate of such a flow takes the slow
// path (csum_aggregate): the fast path could not give its segments one; so
// does a UDP packet sent without a checksum, for which the rule the fast
// path computes by does not hold.
// Without a learned checksum the outer one stays 0
// (TestFastEgressEncapsulates).
//
// guest: the fast path's helpers differ on 6.1
func TestFastEgressOuterChecksum(t *testing.T) {
	for _, proto := range []uint8{protoTCP, protoUDP} {
		for _, ttl := range []byte{64, 63} { // bridged, routed
			fl := fastFlow()
			fl.proto = proto
			t.Run(fmt.Sprintf("%s-ttl-%d", fl.String()[:3], ttl), func(t *testing.T) {
				f := fastHarness(t)
				learnWithChecksum(t, f, fl, ttl)
				for _, size := range []int{16, 301, 1000} { // even and odd lengths
					checkOuterSum(t, f, frame(fl, pktOpts{payload: size}), ttl)
				}
			})
		}
	}
	t.Run("udp-without-checksum", func(t *testing.T) {
		f := fastHarness(t)
		fl := fastFlow()
		learnWithChecksum(t, f, fl, 64)
		if ret, _ := runFast(t, f.objs.FpathVethIn, frame(fl, pktOpts{payload: 301})); ret != tcActUnspec {
			t.Fatalf("returned %d, want a UDP packet with a zero checksum passed to the slow path", ret)
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		f := fastHarness(t)
		fl := fastFlow()
		fl.proto = protoTCP
		learnWithChecksum(t, f, fl, 64)
		before, _ := f.Stats()
		pkt := withL4Checksum(frame(fl, pktOpts{payload: 1200}))
		if ret, _ := runFastOn(t, f.objs.FpathVethIn, pkt, skbCtx{GSOSegs: 2, GSOSize: 600}); ret != tcActUnspec {
			t.Fatalf("returned %d, want the aggregate passed to the slow path", ret)
		}
		after, _ := f.Stats()
		if d := after.Counters["csum_aggregate"] - before.Counters["csum_aggregate"]; d != 1 {
			t.Errorf("csum_aggregate rose by %d, want 1", d)
		}
	})
}

// checkOuterSum sends pkt (TTL 64) by the fast path and checks that its
// outer UDP checksum verifies over the whole packet and the inner TTL is ttl.
func checkOuterSum(t *testing.T, f *FastPath, pkt []byte, ttl byte) {
	t.Helper()
	pkt[14+8] = 64
	binary.BigEndian.PutUint16(pkt[14+10:], ipChecksum(pkt[14:34]))
	ret, out := runFast(t, f.objs.FpathVethIn, withL4Checksum(pkt))
	if ret != tcActRedirect {
		t.Fatalf("returned %d, want sent", ret)
	}
	ip := out[14 : len(pkt)+50]
	udp := ip[20:]
	if binary.BigEndian.Uint16(udp[6:]) == 0 || l4Checksum(ip, udp) != 0 {
		t.Errorf("%d B: outer UDP checksum %#04x does not verify", len(pkt), binary.BigEndian.Uint16(udp[6:]))
	}
	if inner := udp[30:]; inner[8] != ttl || ipChecksum(inner[:20]) != 0 {
		t.Errorf("inner TTL %d (header checksum verifies: %v), want %d", inner[8], ipChecksum(inner[:20]) == 0, ttl)
	}
}

// learnWithChecksum teaches the egress cache fl as a slow path whose VXLAN
// device sends outer UDP checksums would: the packet leaves the NIC with
// one (any nonzero value: the program only looks whether there is one),
// with the inner TTL given (63: a routed layout's hop).
func learnWithChecksum(t *testing.T, f *FastPath, fl flowSpec, ttl byte) {
	t.Helper()
	runFast(t, f.objs.FpathVethIn, innerFrame(fl, 0, 64))
	built := vxlanFrame(underlay4b, underlay4a, 4789, innerFrame(fl, 0, ttl), pktOpts{})
	binary.BigEndian.PutUint16(built[14+20+6:], 0x1234)
	runFast(t, f.objs.FpathNicEg, built)
}
