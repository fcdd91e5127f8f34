package datapath

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
)

// The fuzz drill's packets: valid frames of every shape the parser knows
// (and some it does not), then mutated, and plain random bytes.

// hdr is one Ethernet/IP/L4 layer of a frame the generator builds.
type hdr struct {
	v6           bool
	proto        uint8
	src, dst     netip.Addr
	sport, dport uint16
	tags         []uint16 // TPIDs of VLAN tags, outermost first
	v4opts       int      // IPv4 option words
	frag         uint16   // IPv4 flags and fragment offset
	exts         []uint8  // IPv6 extension headers, in order
	extLens      []uint8  // the length field of each
}

// span is a header field of a built frame, for mutations that corrupt
// exactly the fields a parser believes.
type span struct{ off, n int }

func (h hdr) flow() flowSpec {
	return flowSpec{proto: h.proto, src: h.src, dst: h.dst, sport: h.sport, dport: h.dport}
}

// build writes the frame carrying body after h's L4 header (TCP and UDP
// get one; other protocols carry body right after IP), and the spans of its
// fields, shifted by base.
func (h hdr) build(body []byte, base int, fields *[]span) []byte {
	mark := func(b []byte, n int) { *fields = append(*fields, span{base + len(b), n}) }
	b := []byte{0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01}
	for _, tpid := range h.tags {
		mark(b, 2)
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, 42)
	}
	mark(b, 2)
	if h.v6 {
		b = binary.BigEndian.AppendUint16(b, 0x86dd)
	} else {
		b = binary.BigEndian.AppendUint16(b, 0x0800)
	}
	l4 := h.l4(body)
	if h.v6 {
		b = h.appendIPv6(b, len(l4)+len(body), base, fields)
	} else {
		b = h.appendIPv4(b, len(l4)+len(body), base, fields)
	}
	if len(l4) > 0 {
		mark(b, 2)
		*fields = append(*fields, span{base + len(b) + 2, 2})
		if h.proto == protoUDP {
			*fields = append(*fields, span{base + len(b) + 4, 2})
		}
	}
	b = append(b, l4...)
	return append(b, body...)
}

// l4 is h's TCP or UDP header for body, none for other protocols.
func (h hdr) l4(body []byte) []byte {
	var l4 []byte
	switch h.proto {
	case protoTCP:
		l4 = make([]byte, 20)
		l4[12] = 5 << 4
	case protoUDP:
		l4 = make([]byte, 8)
		binary.BigEndian.PutUint16(l4[4:], uint16(8+len(body)))
	}
	if len(l4) > 0 {
		binary.BigEndian.PutUint16(l4[0:], h.sport)
		binary.BigEndian.PutUint16(l4[2:], h.dport)
	}
	return l4
}

// appendIPv4 appends h's IPv4 header before payload bytes, with options.
func (h hdr) appendIPv4(b []byte, payload, base int, fields *[]span) []byte {
	ip := len(b)
	ihl := 5 + h.v4opts
	hd := make([]byte, ihl*4)
	hd[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(hd[2:], uint16(len(hd)+payload))
	binary.BigEndian.PutUint16(hd[6:], h.frag)
	hd[8] = 64
	hd[9] = h.proto
	s, d := h.src.As4(), h.dst.As4()
	copy(hd[12:], s[:])
	copy(hd[16:], d[:])
	for i := 20; i < len(hd); i++ {
		hd[i] = 1 // NOP options
	}
	for _, f := range []span{{0, 1}, {2, 2}, {6, 2}, {9, 1}} {
		*fields = append(*fields, span{base + ip + f.off, f.n})
	}
	return append(b, hd...)
}

// extSize is the size of h's i-th IPv6 extension header.
func (h hdr) extSize(i int) int {
	switch h.exts[i] {
	case 44: // fragment: fixed size
		return 8
	case 51:
		return (int(h.extLens[i]) + 2) * 4
	default:
		return (int(h.extLens[i]) + 1) * 8
	}
}

// appendIPv6 appends h's IPv6 header and extension headers before payload
// bytes.
func (h hdr) appendIPv6(b []byte, payload, base int, fields *[]span) []byte {
	ip := len(b)
	hd := make([]byte, 40)
	hd[0] = 0x60
	hd[7] = 64
	s, d := h.src.As16(), h.dst.As16()
	copy(hd[8:], s[:])
	copy(hd[24:], d[:])
	var ext []byte
	next := h.proto
	for i := len(h.exts) - 1; i >= 0; i-- {
		e := make([]byte, h.extSize(i))
		switch h.exts[i] {
		case 44: // offset 0 with M set
			e = []byte{next, 0, 0, 1, 0, 0, 0, 7}
		case 51:
		default:
			e[2], e[3] = 1, byte(len(e)-4) // one PadN over the rest
		}
		e[0] = next
		if h.exts[i] != 44 {
			e[1] = h.extLens[i]
		}
		ext = append(e, ext...)
		next = h.exts[i]
	}
	hd[6] = next
	binary.BigEndian.PutUint16(hd[4:], uint16(len(ext)+payload))
	for _, f := range []span{{0, 1}, {4, 2}, {6, 1}} {
		*fields = append(*fields, span{base + ip + f.off, f.n})
	}
	b = append(b, hd...)
	e := len(b)
	for i := range h.exts {
		*fields = append(*fields, span{base + e, 1}, span{base + e + 1, 1})
		e += h.extSize(i)
	}
	return append(b, ext...)
}

func randAddr(r *rand.Rand, v6 bool) netip.Addr {
	if v6 {
		var a [16]byte
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		if r.IntN(8) == 0 { // IPv4-mapped: still IPv6 on the wire
			copy(a[:12], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
		}
		return netip.AddrFrom16(a)
	}
	var a [4]byte
	for i := range a {
		a[i] = byte(r.Uint32())
	}
	return netip.AddrFrom4(a)
}

// randHdr is a layer as overlays carry them, now and then one that
// stretches the parser: tags, options, extension chains, fragments, odd
// protocols.
func randHdr(r *rand.Rand) hdr {
	h := hdr{v6: r.IntN(2) == 0, sport: uint16(r.Uint32()), dport: uint16(r.Uint32())}
	h.src, h.dst = randAddr(r, h.v6), randAddr(r, h.v6)
	switch n := r.IntN(20); {
	case n < 7:
		h.proto = protoTCP
	case n < 14:
		h.proto = protoUDP
	case n < 16:
		h.proto = 1 // ICMP
		if h.v6 {
			h.proto = 58
		}
	case n < 18:
		h.proto = []uint8{47, 50, 132, 4, 41}[r.IntN(5)] // GRE, ESP, SCTP, IP-in-IP
	default:
		h.proto = uint8(r.Uint32())
	}
	switch n := r.IntN(20); {
	case n == 0:
		h.tags = []uint16{0x88a8, 0x8100} // QinQ: more tags than the parser skips
	case n < 3:
		h.tags = []uint16{0x8100}
	case n < 4:
		h.tags = []uint16{0x88a8}
	}
	if !h.v6 {
		if r.IntN(4) == 0 {
			h.v4opts = 1 + r.IntN(10)
		}
		switch n := r.IntN(20); {
		case n < 8:
			h.frag = 0x4000 // DF: not a fragment
		case n == 8:
			h.frag = 0x2000 // first fragment
		case n == 9:
			h.frag = uint16(1 + r.IntN(0x1fff)) // a later one
		case n == 10:
			h.frag = 0x2000 | uint16(1+r.IntN(0x1fff))
		case n == 11:
			h.frag = 0x8000 // the reserved bit: no fragment either
		}
	} else if r.IntN(3) == 0 {
		for k := 1 + r.IntN(5); k > 0; k-- {
			t := []uint8{0, 43, 60, 51, 44}[r.IntN(5)]
			if t == 44 && r.IntN(3) != 0 {
				t = 60
			}
			h.exts = append(h.exts, t)
			h.extLens = append(h.extLens, uint8(r.IntN(4)))
		}
	}
	return h
}

var fuzzPorts = []uint16{4789, 8472}

// validFrame is a frame as a NIC or an overlay device receives it: plain,
// or VXLAN-encapsulated (mostly on a configured port). inner is the layer
// whose flow a parser should find.
func validFrame(r *rand.Rand) (pkt []byte, fields []span, inner hdr, encap bool) {
	inner = randHdr(r)
	size := r.IntN(200)
	if r.IntN(20) == 0 {
		size = r.IntN(1400)
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	if r.IntN(2) == 0 {
		return inner.build(body, 0, &fields), fields, inner, false
	}
	outer := randHdr(r)
	outer.proto = protoUDP
	outer.sport = uint16(r.Uint32())
	switch n := r.IntN(10); {
	case n < 8:
		outer.dport = fuzzPorts[r.IntN(len(fuzzPorts))]
	case n == 8:
		outer.dport = 4790 // VXLAN-GPE: not configured
	default:
		outer.dport = uint16(r.Uint32())
	}
	if r.IntN(2) == 0 { // fewer odd outer headers than inner ones
		outer.tags, outer.v4opts, outer.exts, outer.extLens = nil, 0, nil, nil
		outer.frag &= 0x4000
	}
	var innerFields []span
	innerFrame := inner.build(body, 0, &innerFields)
	vx := []byte{0x08, 0, 0, 0, 0, 0, 42, 0}
	if r.IntN(50) == 0 {
		vx[0] = byte(r.Uint32())
	}
	pkt = outer.build(append(vx, innerFrame...), 0, &fields)
	at := len(pkt) - len(innerFrame)
	fields = append(fields, span{at - 8, 1})
	for _, f := range innerFields {
		fields = append(fields, span{f.off + at, f.n})
	}
	return pkt, fields, inner, true
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// randomFrame is random bytes, the ethertype and IP version often made
// plausible so that the parser gets past the first checks.
func randomFrame(r *rand.Rand) []byte {
	n := 14 + r.IntN(120)
	if r.IntN(4) == 0 {
		n = 14 + r.IntN(1500)
	}
	b := randBytes(r, n)
	switch r.IntN(8) {
	case 0, 1:
		b[12], b[13] = 0x08, 0x00
		if len(b) > 14 && r.IntN(2) == 0 {
			b[14] = 0x45
		}
	case 2, 3:
		b[12], b[13] = 0x86, 0xdd
		if len(b) > 14 && r.IntN(2) == 0 {
			b[14] = 0x60
		}
	case 4:
		b[12], b[13] = 0x81, 0x00
	}
	return b
}

// mutate applies one mutation; it names it.
func mutate(r *rand.Rand, pkt []byte, fields []span) ([]byte, string) {
	switch r.IntN(7) {
	case 0:
		for k := 1 + r.IntN(8); k > 0; k-- {
			pkt[r.IntN(len(pkt))] ^= 1 << r.IntN(8)
		}
		return pkt, "bit flips"
	case 1:
		for k := 1 + r.IntN(4); k > 0; k-- {
			pkt[r.IntN(len(pkt))] = byte(r.Uint32())
		}
		return pkt, "random bytes"
	case 2:
		return pkt[:14+r.IntN(len(pkt)-13)], "truncation"
	case 3, 4: // the fields parsers believe: types, versions, lengths, flags, ports
		f := fields[r.IntN(len(fields))]
		if f.off+f.n > len(pkt) {
			return pkt, "field"
		}
		v := uint16(pkt[f.off])
		if f.n == 2 {
			v = binary.BigEndian.Uint16(pkt[f.off:])
		}
		switch r.IntN(5) {
		case 0:
			v = 0
		case 1:
			v = 0xffff
		case 2:
			v++
		case 3:
			v--
		default:
			v = uint16(r.Uint32())
		}
		if f.n == 2 {
			binary.BigEndian.PutUint16(pkt[f.off:], v)
		} else if f.off == 0 || r.IntN(2) == 0 {
			pkt[f.off] = byte(v)
		} else { // a version/IHL byte: one nibble at a time
			pkt[f.off] = pkt[f.off]&0xf0 | byte(v)&0x0f
		}
		return pkt, "field"
	case 5:
		at := 12 + r.IntN(len(pkt)-11)
		if r.IntN(2) == 0 {
			ins := randBytes(r, 1+r.IntN(16))
			return append(pkt[:at:at], append(ins, pkt[at:]...)...), "insert/delete"
		}
		end := min(len(pkt), at+1+r.IntN(16))
		if len(pkt)-(end-at) < 14 {
			return pkt, "insert/delete"
		}
		return append(pkt[:at:at], pkt[end:]...), "insert/delete"
	default:
		keep := 14 + r.IntN(len(pkt)-13)
		return append(pkt[:keep:keep], randBytes(r, r.IntN(64))...), "random tail"
	}
}

// fuzzPacket is the drill's i-th packet: a quarter random bytes, a quarter
// valid frames, half valid frames with one to three mutations.
func fuzzPacket(r *rand.Rand) (pkt []byte, class string, inner hdr, encap, valid bool) {
	n := r.IntN(4)
	if n == 0 {
		return randomFrame(r), "random bytes", hdr{}, false, false
	}
	pkt, fields, inner, encap := validFrame(r)
	if n == 1 {
		return pkt, "valid", inner, encap, true
	}
	k := 1 + r.IntN(3)
	if r.IntN(2) == 0 {
		k = 1
	}
	for i := 0; i < k; i++ {
		var kind string
		pkt, kind = mutate(r, pkt, fields)
		if i == 0 {
			class = "mutated: " + kind
		}
	}
	if k > 1 {
		class = "mutated: several"
	}
	return pkt, class, inner, encap, false
}
