package datapath

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// refParse is the reference the fuzz drill (fuzzdrill_test.go) holds
// bpf/parse.h to: the inner flow of a frame that starts with its Ethernet
// header, or the counter name of the reason it is left alone. It is written
// from parse.h's stated rules, not from its code, over a plain byte slice:
// one VLAN tag at most; any IPv4 fragment (the first included) passes;
// IPv4 options and up to four IPv6 extension headers are skipped; at a NIC
// (encap) only UDP to a configured VXLAN port with the I flag is overlay
// traffic; ports only for TCP and UDP, and only when their whole header is
// there. Lengths in the headers (IPv4 total length, UDP length, the IPv6
// payload length) are not believed, as in the program: only the bytes
// present count.
func refParse(b []byte, encap bool, ports []uint16) (flowSpec, string) {
	off, et, why := refEth(b, 0)
	if why != "" {
		return flowSpec{}, why
	}
	if encap {
		outer, o, why := refIP(b, off, et)
		if why != "" {
			return flowSpec{}, why
		}
		if outer.proto != protoUDP {
			return flowSpec{}, "not_vxlan"
		}
		if !refHas(b, o, 8) {
			return flowSpec{}, "truncated"
		}
		if !slices.Contains(ports, binary.BigEndian.Uint16(b[o+2:])) {
			return flowSpec{}, "not_vxlan"
		}
		o += 8
		if !refHas(b, o, 8) {
			return flowSpec{}, "truncated"
		}
		if b[o]&0x08 == 0 { // RFC 7348: the I flag says the VNI is valid
			return flowSpec{}, "malformed"
		}
		if off, et, why = refEth(b, o+8); why != "" {
			return flowSpec{}, why
		}
	}
	f, o, why := refIP(b, off, et)
	if why != "" {
		return flowSpec{}, why
	}
	var need int
	switch f.proto {
	case protoTCP:
		need = 20
	case protoUDP:
		need = 8
	default:
		return f, ""
	}
	if !refHas(b, o, need) {
		return flowSpec{}, "truncated"
	}
	f.sport = binary.BigEndian.Uint16(b[o:])
	f.dport = binary.BigEndian.Uint16(b[o+2:])
	return f, ""
}

// refSplit is refParse as the split program sees it: always at a NIC, and
// only inner flows of proto (0: any) are split.
func refSplit(b []byte, ports []uint16, proto uint8) (flowSpec, string) {
	f, why := refParse(b, true, ports)
	if why == "" && proto != 0 && f.proto != proto {
		return flowSpec{}, "not_split_proto"
	}
	return f, why
}

func refHas(b []byte, off, n int) bool { return off >= 0 && off+n <= len(b) }

// refEth skips the Ethernet header at off and one 802.1Q or 802.1ad tag.
func refEth(b []byte, off int) (int, uint16, string) {
	if !refHas(b, off+12, 2) {
		return 0, 0, "truncated"
	}
	et := binary.BigEndian.Uint16(b[off+12:])
	off += 14
	if et == 0x8100 || et == 0x88a8 {
		if !refHas(b, off+2, 2) {
			return 0, 0, "truncated"
		}
		et = binary.BigEndian.Uint16(b[off+2:])
		off += 4
	}
	if et != 0x0800 && et != 0x86dd {
		return 0, 0, "non_ip"
	}
	return off, et, ""
}

// refIP reads the IP header of ethertype et at off: the addresses and the
// upper protocol, and where that protocol's header starts.
func refIP(b []byte, off int, et uint16) (flowSpec, int, string) {
	if et == 0x0800 {
		if !refHas(b, off, 20) {
			return flowSpec{}, 0, "truncated"
		}
		h := b[off:]
		if h[0]>>4 != 4 || int(h[0]&0x0f) < 5 {
			return flowSpec{}, 0, "malformed"
		}
		if binary.BigEndian.Uint16(h[6:])&0x3fff != 0 { // MF or an offset: DF alone is no fragment
			return flowSpec{}, 0, "fragment"
		}
		ihl := int(h[0]&0x0f) * 4
		if !refHas(b, off, ihl) {
			return flowSpec{}, 0, "truncated"
		}
		return flowSpec{proto: h[9], src: netip.AddrFrom4([4]byte(h[12:16])), dst: netip.AddrFrom4([4]byte(h[16:20]))},
			off + ihl, ""
	}
	if !refHas(b, off, 40) {
		return flowSpec{}, 0, "truncated"
	}
	h := b[off:]
	if h[0]>>4 != 6 {
		return flowSpec{}, 0, "malformed"
	}
	f := flowSpec{src: netip.AddrFrom16([16]byte(h[8:24])), dst: netip.AddrFrom16([16]byte(h[24:40]))}
	next := h[6]
	off += 40
	isExt := func(n uint8) bool { return n == 0 || n == 43 || n == 51 || n == 60 } // hop-by-hop, routing, AH, destination
	for range 4 {
		if next == 44 {
			return flowSpec{}, 0, "fragment"
		}
		if !isExt(next) {
			break
		}
		if !refHas(b, off, 2) {
			return flowSpec{}, 0, "truncated"
		}
		n := int(b[off+1])
		if next == 51 { // RFC 4302: AH counts 4-byte words, less 2
			n = (n + 2) * 4
		} else { // RFC 8200: 8-byte units, less 1
			n = (n + 1) * 8
		}
		next = b[off]
		off += n
	}
	// A chain longer than the program follows is not parsed past.
	switch {
	case next == 44:
		return flowSpec{}, 0, "fragment"
	case isExt(next):
		return flowSpec{}, 0, "malformed"
	case off > len(b):
		return flowSpec{}, 0, "truncated"
	}
	f.proto = next
	return f, off, ""
}

// String makes failure messages readable: "tcp 10.0.0.1:40000 > 10.0.0.2:5201".
func (f flowSpec) String() string {
	name := map[uint8]string{protoTCP: "tcp", protoUDP: "udp"}[f.proto]
	if name == "" {
		return fmt.Sprintf("proto %d %v > %v", f.proto, f.src, f.dst)
	}
	return fmt.Sprintf("%s %v > %v", name, netip.AddrPortFrom(f.src, f.sport), netip.AddrPortFrom(f.dst, f.dport))
}
