package datapath

import (
	"errors"

	"github.com/cilium/ebpf"
)

// MicroFlow is what the split hook knows of one flow in mode mflow
// (bpf/mflow.h): whether its last rate windows made it an elephant, and
// how many of its packets went in micro-flows.
type MicroFlow struct {
	Elephant bool
	Split    uint64
}

// ReadMicroFlow reads flow fh's micro-flow state from the datapath pinned
// in pinDir; ok is false when the split hook has not seen the flow (or
// forgot it: the map is an LRU).
func ReadMicroFlow(pinDir string, fh uint32) (m MicroFlow, ok bool, err error) {
	mp, err := openPinned(pinDir, "falcon_mflow")
	if err != nil {
		return m, false, err
	}
	defer mp.Close()
	var v falconMflow
	if err := mp.Lookup(&fh, &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return m, false, nil
		}
		return m, false, err
	}
	return MicroFlow{Elephant: v.Elephant >= MflowElephantWindows, Split: v.Split}, true, nil
}
