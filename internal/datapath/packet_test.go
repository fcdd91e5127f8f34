package datapath

import (
	"encoding/binary"
	"net/netip"

	"github.com/falconnet/falcon/internal/steer"
)

// Packets are built by hand, byte by byte, so the tests depend on nothing
// but the wire formats (RFC 791, 8200, 768, 793, 7348, IEEE 802.1Q).

const (
	protoTCP = 6
	protoUDP = 17
)

type flowSpec struct {
	proto        uint8
	src, dst     netip.Addr
	sport, dport uint16
}

func (f flowSpec) hash() uint32 {
	sport, dport := f.sport, f.dport
	if f.proto != protoTCP && f.proto != protoUDP {
		sport, dport = 0, 0
	}
	return steer.FlowHash(f.proto, f.src, f.dst, sport, dport)
}

type pktOpts struct {
	vlan      bool   // one 802.1Q tag after the Ethernet addresses
	fragOff   uint16 // IPv4 fragment offset (8-byte units)
	moreFrags bool
	v6Frag    bool // IPv6 fragment header before L4
	v6HopOpts bool // IPv6 hop-by-hop header before L4
	v6HopLen  int  // its length in 8-byte units beyond the first 8 (Pad1 options)
	ipOptions int  // IPv4 options, in 4-byte words
	tos       byte // IPv4 TOS (DSCP and ECN)
	payload   int  // bytes after the L4 header
}

func ethernet(ethType uint16, vlan bool) []byte {
	b := []byte{0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01}
	if vlan {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, 42)
	}
	return binary.BigEndian.AppendUint16(b, ethType)
}

func l4(f flowSpec, payload int) []byte {
	var b []byte
	switch f.proto {
	case protoTCP:
		b = make([]byte, 20)
		b[12] = 5 << 4
	case protoUDP:
		b = make([]byte, 8)
		binary.BigEndian.PutUint16(b[4:], uint16(8+payload))
	}
	if len(b) > 0 {
		binary.BigEndian.PutUint16(b[0:], f.sport)
		binary.BigEndian.PutUint16(b[2:], f.dport)
	}
	return append(b, make([]byte, payload)...)
}

// ipPacket is an IP packet (no Ethernet) carrying f.
func ipPacket(f flowSpec, o pktOpts) []byte {
	body := l4(f, o.payload)
	if f.src.Is4() {
		ihl := 5 + o.ipOptions
		h := make([]byte, ihl*4)
		h[0] = 0x40 | byte(ihl)
		h[1] = o.tos
		binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(body)))
		frag := o.fragOff
		if o.moreFrags {
			frag |= 0x2000
		}
		binary.BigEndian.PutUint16(h[6:], frag)
		h[8] = 64
		h[9] = f.proto
		s, d := f.src.As4(), f.dst.As4()
		copy(h[12:], s[:])
		copy(h[16:], d[:])
		for i := 20; i < len(h); i++ {
			h[i] = 1 // NOP options
		}
		return append(h, body...)
	}
	next := f.proto
	var ext []byte
	if o.v6Frag {
		ext = append([]byte{next, 0, 0, 1, 0, 0, 0, 7}, ext...)
		next = 44
	}
	if o.v6HopOpts {
		hop := append([]byte{next, byte(o.v6HopLen), 1, 4, 0, 0, 0, 0}, make([]byte, 8*o.v6HopLen)...) // PadN, Pad1s
		ext = append(hop, ext...)
		next = 0
	}
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(ext)+len(body)))
	h[6] = next
	h[7] = 64
	s, d := f.src.As16(), f.dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return append(append(h, ext...), body...)
}

func frame(f flowSpec, o pktOpts) []byte {
	t := uint16(0x0800)
	if f.src.Is6() {
		t = 0x86dd
	}
	return append(ethernet(t, o.vlan), ipPacket(f, o)...)
}

// vxlanFrame wraps inner (an Ethernet frame) in outer Ethernet/IP/UDP/VXLAN.
func vxlanFrame(outerSrc, outerDst netip.Addr, port uint16, inner []byte, o pktOpts) []byte {
	vx := []byte{0x08, 0, 0, 0, 0, 0, 42, 0}
	udp := flowSpec{proto: protoUDP, src: outerSrc, dst: outerDst, sport: 51234, dport: port}
	o.payload = 0
	outer := ipPacket(udp, o)
	// fix the UDP and IP lengths for the payload
	payload := append(vx, inner...)
	ip := append(outer, payload...)
	udpOff := len(outer) - 8
	binary.BigEndian.PutUint16(ip[udpOff+4:], uint16(8+len(payload)))
	if outerSrc.Is4() {
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		ihl := int(ip[0]&0x0f) * 4
		binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:ihl]))
	} else {
		binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-40))
	}
	t := uint16(0x0800)
	if outerSrc.Is6() {
		t = 0x86dd
	}
	return append(ethernet(t, o.vlan), ip...)
}

var (
	underlay4a = netip.MustParseAddr("192.0.2.1")
	underlay4b = netip.MustParseAddr("192.0.2.2")
	underlay6a = netip.MustParseAddr("2001:db8::1")
	underlay6b = netip.MustParseAddr("2001:db8::2")
)
