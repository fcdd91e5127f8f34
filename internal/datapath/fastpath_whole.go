package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// SetWhole says whether the container behind host-side veth ifindex takes
// TCP aggregates whole (its namespace does not forward): only then does
// the fast path deliver one decapsulated. Decapsulation in tc keeps the
// aggregate's tunnel GSO bit, harmless to a local socket, but a container
// that forwarded the aggregate would cut it into segments by that bit and
// drop them.
func (f *FastPath) SetWhole(ifindex int, whole bool) error {
	if ifindex <= 0 {
		return fmt.Errorf("fast path: ifindex %d must be positive", ifindex)
	}
	k := uint32(ifindex)
	if whole {
		return f.objs.FpWhole.Put(k, uint8(1))
	}
	if err := f.objs.FpWhole.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}
