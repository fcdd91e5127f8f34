package agent

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// walkAttrs calls fn for each netlink attribute in b (nfacct's and
// nftables' replies), its type without the nested and byte-order flags;
// it stops at a malformed one. internal/conntrack has its own: a package
// of one function more is what this package's import limit forbids.
func walkAttrs(b []byte, fn func(typ uint16, val []byte)) {
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
