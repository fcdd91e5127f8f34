package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// WholeAddrs is how many of a container's addresses Whole passes on: an
// aggregate to any other stays on the slow path.
const WholeAddrs = 4

// Whole says which TCP aggregates a container takes whole. Decapsulation
// in tc keeps an aggregate's tunnel GSO bit: harmless to a local socket,
// but a container that forwarded the aggregate would cut it into segments
// by that bit, or encapsulate it again, by inner-header offsets that no
// longer point at an inner header. The zero Whole takes none.
type Whole struct {
	// Any: the container's namespace forwards IPv4 on no device, so
	// whatever reaches it stays in it.
	Any bool
	// Addrs are the namespace's own IPv4 addresses, where nothing in it
	// rewrites a destination before routing: a packet to one of them is
	// delivered there, forwarding or not.
	Addrs []netip.Addr
}

// None says whether w takes no aggregate at all.
func (w Whole) None() bool { return !w.Any && len(w.Addrs) == 0 }

// SetWhole says which TCP aggregates the container behind host-side veth
// ifindex takes whole: only those does the fast path deliver decapsulated.
func (f *FastPath) SetWhole(ifindex int, w Whole) error {
	if ifindex <= 0 {
		return fmt.Errorf("fast path: ifindex %d must be positive", ifindex)
	}
	k := uint32(ifindex)
	if w.None() {
		if err := f.objs.FpWhole.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		return nil
	}
	v := fastpathFpWholeRule{}
	if w.Any {
		v.Any = 1
	}
	for _, a := range w.Addrs {
		if !a.Is4() {
			return fmt.Errorf("fast path: %s is not an IPv4 address", a)
		}
		if int(v.N) < WholeAddrs {
			b := a.As4()
			v.Addr[v.N] = binary.NativeEndian.Uint32(b[:])
			v.N++
		}
	}
	return f.objs.FpWhole.Put(k, &v)
}
