// Package xdpsend is falcon's kernel sender: datagrams sent the way a
// remote host's would arrive, at almost no cost to the receiving machine.
// It learns how the overlay carries one datagram (captures the frame the
// sending host puts on the wire) and hands copies of that frame to the wire
// device from an XDP program run in live-frame mode (bpf/lab/xdpsend.c).
package xdpsend

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Template is one datagram as the overlay puts it on the wire, ready to be
// sent again.
type Template struct {
	Frame []byte
	// Offsets of the UDP source ports in Frame: the datagram's own
	// (InnerSport) and, when the overlay encapsulates it, the tunnel's
	// (OuterSport, else 0). The sender writes a flow's ports there.
	InnerSport, OuterSport int
}

// Encapsulated reports whether the overlay wrapped the datagram (VXLAN).
func (t Template) Encapsulated() bool { return t.OuterSport != 0 }

// HeaderLen is the length of the frame's headers, to the end of the
// datagram's UDP header: what the sender writes into every frame again.
func (t Template) HeaderLen() int { return t.InnerSport + udpLen }

// MaxHeader is the longest header a template may have (struct template in
// bpf/lab/xdpsend.c): VXLAN over IPv4 without options takes 92 B.
const MaxHeader = 128

// Port reads the 16-bit port at offset off.
func (t Template) Port(off int) uint16 { return binary.BigEndian.Uint16(t.Frame[off:]) }

// MaxFrame is the longest frame live-frame mode takes: the kernel puts
// each in one page, after its headroom and before its skb_shared_info.
const MaxFrame = 3500

// Errors a captured frame can be refused with, for callers that explain
// what the user can change.
var (
	ErrFragmented = errors.New("the datagram leaves the sending host in IP fragments")
	ErrNotIPv4    = errors.New("not IPv4 (the kernel sender sends IPv4 frames only)")
)

const (
	ethLen     = 14
	udpLen     = 8
	vxlanLen   = 8
	vxlanFlagI = 0x08 // the VNI is valid: set in every VXLAN header
)

// ParseFrame reads frame as the datagram to UDP port dport, sent as it is
// (host networking) or inside one VXLAN header (an overlay), and returns
// it as a template with both UDP checksums zeroed: IPv4 allows a zero UDP
// checksum, and with it the ports can change without recomputing one.
func ParseFrame(frame []byte, dport int) (Template, error) {
	t := Template{Frame: append([]byte(nil), frame...)}
	if len(frame) > MaxFrame {
		return t, fmt.Errorf("frame of %d B: live-frame mode sends at most %d B", len(frame), MaxFrame)
	}
	off := 0
	for depth := 0; depth < 2; depth++ {
		sport, err := udpAt(t.Frame, off)
		if err != nil {
			return t, err
		}
		dst := int(binary.BigEndian.Uint16(t.Frame[sport+2:]))
		binary.BigEndian.PutUint16(t.Frame[sport+6:], 0)
		if dst == dport {
			t.InnerSport = sport
			if t.HeaderLen() > MaxHeader {
				return t, fmt.Errorf("headers of %d B (IP options?): the kernel sender rewrites at most %d B per frame", t.HeaderLen(), MaxHeader)
			}
			return t, nil
		}
		vx := sport + udpLen
		if len(t.Frame) < vx+vxlanLen+ethLen || t.Frame[vx]&vxlanFlagI == 0 {
			break
		}
		t.OuterSport, off = sport, vx+vxlanLen
	}
	return t, fmt.Errorf("no UDP datagram to port %d in the frame (plain or in VXLAN)", dport)
}

// udpAt checks the Ethernet, IPv4 and UDP headers from off and returns the
// offset of the UDP header.
func udpAt(f []byte, off int) (int, error) {
	if len(f) < off+ethLen+20+udpLen {
		return 0, fmt.Errorf("frame of %d B too short for Ethernet, IPv4 and UDP at %d", len(f), off)
	}
	if et := binary.BigEndian.Uint16(f[off+12:]); et != 0x0800 {
		return 0, fmt.Errorf("ethertype %#04x at %d: %w", et, off, ErrNotIPv4)
	}
	ip := off + ethLen
	if f[ip]>>4 != 4 {
		return 0, fmt.Errorf("IP version %d at %d: %w", f[ip]>>4, ip, ErrNotIPv4)
	}
	ihl := int(f[ip]&0x0f) * 4
	if ihl < 20 || len(f) < ip+ihl+udpLen {
		return 0, fmt.Errorf("IPv4 header length %d at %d does not fit the frame", ihl, ip)
	}
	if frag := binary.BigEndian.Uint16(f[ip+6:]); frag&0x3fff != 0 {
		return 0, ErrFragmented
	}
	if f[ip+9] != 17 {
		return 0, fmt.Errorf("IP protocol %d at %d, not UDP", f[ip+9], ip)
	}
	return ip + ihl, nil
}
