package agent

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func nlAttr(typ uint16, val []byte) []byte {
	b := make([]byte, 4, 4+len(val)+3)
	binary.NativeEndian.PutUint16(b, uint16(4+len(val)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// TestWalkAttrs: flags masked, padding skipped, a malformed attribute ends
// the walk, and an unpadded last one is still read.
func TestWalkAttrs(t *testing.T) {
	b := slices.Concat(nlAttr(1, []byte("ab")), nlAttr(2|unix.NLA_F_NESTED, []byte{1, 2, 3, 4}), nlAttr(3|unix.NLA_F_NET_BYTEORDER, nil))
	for _, c := range []struct {
		name string
		b    []byte
		want []uint16
	}{
		{"three", b, []uint16{1, 2, 3}},
		{"truncated", b[:len(b)-2], []uint16{1, 2}},
		{"length too small", append(slices.Clone(b[:8]), 2, 0, 9, 0), []uint16{1}},
		{"unpadded last", nlAttr(5, []byte{7})[:5], []uint16{5}},
		{"empty", nil, nil},
	} {
		var got []uint16
		walkAttrs(c.b, func(typ uint16, _ []byte) { got = append(got, typ) })
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: types %v, want %v", c.name, got, c.want)
		}
	}
}
