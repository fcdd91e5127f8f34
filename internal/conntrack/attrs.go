package conntrack

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// ctnetlink's numbers (include/uapi/linux/netfilter/nfnetlink_conntrack.h).
const (
	nfnlSubsysCtnetlink = 1
	ipctnlMsgCtNew      = 0
	ipctnlMsgCtGet      = 1
	nfgenLen            = 4

	ctaTupleOrig = 1
	ctaStatus    = 3
	ctaProtoinfo = 4
	ctaTimeout   = 7

	ctaTupleIP    = 1
	ctaTupleProto = 2
	ctaIPv4Src    = 1
	ctaIPv4Dst    = 2
	ctaProtoNum   = 1
	ctaProtoSport = 2
	ctaProtoDport = 3

	ctaProtoinfoTCP           = 1
	ctaProtoinfoTCPState      = 1
	ctaProtoinfoTCPFlagsOrig  = 4
	ctaProtoinfoTCPFlagsReply = 5
	ipCtTCPFlagBeLiberal      = 0x08
)

// attr appends one netlink attribute, padded to 4 bytes.
func attr(b []byte, typ uint16, val []byte) []byte {
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(4+len(val)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(append(b, h[:]...), val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// tupleAttrs is CTA_TUPLE_ORIG for t: the kernel finds the entry by
// either of its directions' tuples.
func tupleAttrs(t Tuple) []byte {
	s, d := t.Src.As4(), t.Dst.As4()
	ip := attr(attr(nil, ctaIPv4Src, s[:]), ctaIPv4Dst, d[:])
	proto := attr(attr(attr(nil, ctaProtoNum, []byte{t.Proto}), ctaProtoSport, be16(t.Sport)), ctaProtoDport, be16(t.Dport))
	tuple := attr(attr(nil, ctaTupleIP|unix.NLA_F_NESTED, ip), ctaTupleProto|unix.NLA_F_NESTED, proto)
	return attr(nil, ctaTupleOrig|unix.NLA_F_NESTED, tuple)
}

// walk calls fn for each attribute in b (type without the nested and
// byte-order flags); it stops at a malformed one.
func walk(b []byte, fn func(typ uint16, val []byte)) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		if l < 4 || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER), b[4:l])
		l = (l + 3) &^ 3
		if l > len(b) {
			return
		}
		b = b[l:]
	}
}

func parseEntry(b []byte, e *Entry) {
	walk(b, func(typ uint16, val []byte) {
		switch {
		case typ == ctaStatus && len(val) >= 4:
			e.Status = binary.BigEndian.Uint32(val)
		case typ == ctaTimeout && len(val) >= 4:
			e.Timeout = binary.BigEndian.Uint32(val)
		case typ == ctaProtoinfo:
			walk(val, func(typ uint16, val []byte) {
				if typ != ctaProtoinfoTCP {
					return
				}
				walk(val, func(typ uint16, val []byte) {
					if typ == ctaProtoinfoTCPState && len(val) >= 1 {
						e.TCPState = val[0]
					}
				})
			})
		}
	})
}
