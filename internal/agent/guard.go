package agent

import (
	"errors"
	"fmt"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// wantStages are the devices the ordering guard counts at: the containers'
// ends behind a hooked VXLAN device (the last stage) and the VXLAN devices
// (on the way, where a backlog may drop).
func wantStages(ov *discover.Overlay) (map[datapath.StageDev]string, error) {
	want := map[datapath.StageDev]string{}
	inodes := map[string]uint32{}
	var errs []error
	for _, d := range steered(ov) {
		ino, ok := inodes[d.Netns]
		if !ok {
			n, err := netns.Inode(d.Netns)
			if err != nil {
				if netns.Exists(d.Netns) { // a container that vanished on the way is no error
					errs = append(errs, fmt.Errorf("namespace of %s: %w", d, err))
				}
				continue
			}
			ino = uint32(n)
			inodes[d.Netns] = ino
		}
		want[datapath.StageDev{NetnsIno: ino, Ifindex: d.Ifindex, Last: d.Role == discover.RoleContainer}] = d.String()
	}
	return want, errors.Join(errs...)
}

// syncStages registers the stage devices with the guard before any hook
// steers into them, and forgets those that left. A container that vanished
// on the way is no error.
func (m *falconMode) syncStages(h *Host, ov *discover.Overlay) error {
	want, err := wantStages(ov)
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
