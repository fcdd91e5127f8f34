package agent

import (
	"errors"
	"fmt"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// wantStages are the devices whose receive is a stage a hook steers, for
// the ordering guard to count arrivals at: the VXLAN devices (the NIC's
// hook steers them), the containers' ends behind a hooked VXLAN device, and
// with --split the NICs themselves.
func wantStages(h *Host, ov *discover.Overlay) (map[datapath.StageDev]string, error) {
	want := map[datapath.StageDev]string{}
	inodes := map[string]uint32{}
	add := func(d discover.Device, by datapath.HookRole) error {
		ino, ok := inodes[d.Netns]
		if !ok {
			n, err := netns.Inode(d.Netns)
			if err != nil {
				return fmt.Errorf("namespace of %s: %w", d, err)
			}
			ino = uint32(n)
			inodes[d.Netns] = ino
		}
		want[datapath.StageDev{NetnsIno: ino, Ifindex: d.Ifindex, SteeredBy: by}] = d.String()
		return nil
	}
	var errs []error
	for _, d := range steered(ov) {
		by := datapath.HookOnOverlay
		if d.Role == discover.RoleOverlay {
			by = datapath.HookOnNIC
		}
		errs = append(errs, add(d, by))
	}
	if h.Opts.Split {
		for _, hk := range wantHooks(h, ov) {
			if hk.Role == datapath.HookOnNIC {
				if nic, ok := ov.Find(hk.Netns, hk.Ifindex); ok {
					errs = append(errs, add(nic, datapath.HookSplit))
				}
			}
		}
	}
	return want, errors.Join(errs...)
}

// syncStages registers the stage devices with the guard before any hook
// steers into them, and forgets those that left. A container that vanished
// on the way is no error.
func (m *falconMode) syncStages(h *Host, ov *discover.Overlay) error {
	want, err := wantStages(h, ov)
	errs := []error{err}
	if m.stages == nil {
		m.stages = map[datapath.StageDev]bool{}
	}
	for s := range m.stages {
		if _, ok := want[s]; !ok {
			errs = append(errs, m.dp.RemoveStage(s))
			delete(m.stages, s)
		}
	}
	for s := range want {
		if m.stages[s] {
			continue
		}
		if err := m.dp.AddStage(s); err != nil {
			errs = append(errs, err)
			continue
		}
		m.stages[s] = true
	}
	return errors.Join(errs...)
}
