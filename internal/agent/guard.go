package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// wantStages are the devices the ordering guard counts at: the containers'
// ends behind a hooked VXLAN device and the host NICs (the last stage) and
// the VXLAN devices (on the way, where a backlog may drop).
func wantStages(ov *discover.Overlay) (map[datapath.StageDev]discover.Device, error) {
	want := map[datapath.StageDev]discover.Device{}
	inodes := map[string]uint32{}
	var errs []error
	for _, d := range append(steered(ov), ov.Role(discover.RoleHostNIC)...) {
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
		want[datapath.StageDev{NetnsIno: ino, Ifindex: d.Ifindex, Last: d.Role == discover.RoleContainer || d.Role == discover.RoleHostNIC}] = d
	}
	return want, errors.Join(errs...)
}

// syncStages registers the stage devices with the guard, and puts its
// arrival counter on each container's end, before any hook steers into
// them; it forgets those that left. A container that vanished on the way
// is no error.
func (m *falconMode) syncStages(h *Host, ov *discover.Overlay) error {
	want, err := wantStages(ov)
	errs := []error{err}
	if m.stages == nil {
		m.stages = map[datapath.StageDev]datapath.Hook{}
	}
	for s, hk := range m.stages {
		// The key names a namespace by its inode, which the kernel hands
		// on: a container gone and a new one that got its inode and
		// ifindex, seen in one look, share it. The entry is still the old
		// end's (its arrival counter, its hook in the state) until replaced.
		if d, ok := want[s]; ok && d.Netns == hk.Netns && d.Ifindex == hk.Ifindex {
			continue
		}
		if s.Last {
			if err := m.dp.DetachArrival(hk); err != nil {
				errs = append(errs, err)
			} else {
				errs = append(errs, h.RemoveHooks(hk))
			}
		}
		errs = append(errs, m.dp.RemoveStage(s))
		delete(m.stages, s)
	}
	for s, d := range want {
		if _, ok := m.stages[s]; ok {
			continue
		}
		if err := m.dp.AddStage(s); err != nil {
			errs = append(errs, err)
			continue
		}
		hk := datapath.Hook{Netns: d.Netns, Ifindex: d.Ifindex, Name: d.Name, Role: datapath.HookArrival, HostNIC: d.Role == discover.RoleHostNIC}
		if s.Last {
			// Recorded first, so that a killed agent's clsact filter
			// (kernels before 6.6) is found and removed.
			if err := h.AddHooks(hk); err != nil {
				return err
			}
			if err := m.dp.AttachArrival(hk); err != nil {
				h.RemoveHooks(hk)
				errs = append(errs, m.dp.RemoveStage(s))
				if netns.Exists(d.Netns) {
					errs = append(errs, err)
				}
				continue
			}
		}
		m.stages[s] = hk
	}
	return errors.Join(errs...)
}

// drain sends every flow inline under its guard and waits up to limit
// until none is steered, so that detaching reorders nothing; it says
// whether that happened. A flow comes back only when none of its packets
// is queued behind a hook: one at full rate whose queues never empty
// cannot. Stop detaches after DrainTimeout anyway, which may let such a
// flow's next packets overtake queued ones: said loudly, with how many
// segments were still on their way. Then the split programs stop marking
// (datapath.SetUnmarking: a detach must not change a frame's metadata
// under GRO), within the same limit. Draining stays on: the caller ends
// it.
func (m *falconMode) drain(h *Host, limit time.Duration) bool {
	if err := m.dp.SetDraining(true); err != nil {
		h.Log().Warn("drain", "err", err)
		return false
	}
	start := time.Now()
	deadline, report := start.Add(limit), start.Add(time.Second)
	for {
		p, err := m.dp.Steered()
		if err != nil {
			h.Log().Warn("drain", "err", err)
			return false
		}
		if p.Flows == 0 && !m.dp.Config().Unmarking {
			if waited := time.Since(start); waited > time.Second {
				h.Log().Info("drained: every flow back inline", "after", waited.Round(time.Millisecond))
			}
			if p.IdleFlows > 0 {
				h.Log().Info("drained, but idle flows have segments unaccounted for (lost where no drop is counted, or queued on a CPU stalled for the guard timeout)",
					"flows", p.IdleFlows, "segments", p.IdleInFlight, "guard_timeout", m.cfg.GuardTimeout)
			}
			if err := m.dp.SetUnmarking(true); err != nil {
				h.Log().Warn("drain", "err", err)
				return false
			}
		}
		if m.dp.Config().Unmarking {
			done, err := m.dp.Unmarked()
			if err != nil {
				h.Log().Warn("drain", "err", err)
				return false
			}
			if done {
				return true
			}
		}
		now := time.Now()
		if now.After(deadline) && m.dp.Config().Unmarking {
			h.Log().Warn("drain: a split program still marks frames that GRO holds; detaching now could reorder their flows", "after", limit)
			return false
		}
		if now.After(deadline) {
			h.Log().Warn("drain: flows still steered; detaching now would let their next packets overtake queued ones",
				"flows", p.Flows, "segments_unaccounted", p.InFlight, "after", limit)
			return false
		}
		if now.After(report) {
			h.Log().Info("draining: waiting for steered flows to pause", "flows", p.Flows,
				"segments_in_flight", p.InFlight, "waited", now.Sub(start).Round(time.Second), "limit", limit)
			report = report.Add(time.Second)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
