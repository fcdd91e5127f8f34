package agent

import (
	"context"
	"errors"
	"time"

	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/policy"
)

// Standing down. Attached, falcon costs every packet its programs even
// when it steers nothing: measured on 2 vCPUs (one UDP flow, nothing
// steered), programs that return at once still cost about 5 % and the
// whole datapath 10–14 %, and a ping-pong's round trip 8–20 %. So falcon
// takes itself off the path whenever it has nothing to do, as its
// engagement policy says (internal/policy): when no CPU has been busy for
// a second (nothing to relieve), when no CPU it steers to has had room as
// long (nothing to steer to), and when steering does not pay. It drains every flow
// back inline, puts RPS back, detaches every hook, arrival counter, split
// program and the guard's tracepoint programs, and the packets run
// exactly as without falcon. At the first busy sample with a CPU of the
// set to spare it runs the engagement test, whose off windows are this
// state, and comes back if steering pays; after a verdict against it, a
// spell that follows 5 s with no CPU busy is tested at once, and the same
// spell again after a wait that doubles each time. Coming back is exact for flows
// that run through it: the hooks count and mark their own packets, so a
// running flow may move once its marked packets arrived (bpf/guard.h).
const standDownDrain = time.Second

// standDown detaches everything if every flow comes back inline within
// standDownDrain; otherwise it stays attached, inline, and says so. why
// goes to the log.
func (m *falconMode) standDown(h *Host, why string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dp.Config().StoodDown {
		return true
	}
	if !m.drain(h, standDownDrain) {
		if err := m.dp.SetDraining(false); err != nil {
			h.Log().Warn("stand down: end drain", "err", err)
		}
		h.Log().Info("staying attached, inline: a flow did not come back in time to detach without reordering it", "why", why)
		return false
	}
	// RPS first, while the hooks still keep every flow inline; the fast
	// path's own stays while it runs.
	err := h.journal.RestoreWhere(m.fast.notSenderRPS())
	clear(m.applied)
	err = errors.Join(err, m.syncHooks(h, &discover.Overlay{}, false), m.dp.StandDown(true),
		m.dp.SetDraining(false))
	if err != nil {
		// Half-way: attach again what went, so the datapath is whole.
		h.Log().Warn("stand down failed half-way; attaching again", "err", err)
		if err := errors.Join(m.dp.StandDown(false), m.attachAll(h, m.ov, false)); err != nil {
			h.Log().Warn("attach again", "err", err)
		}
		return false
	}
	if why != "" {
		h.Log().Info("stood down: every falcon program is off the path", "why", why)
	}
	return true
}

// standUp attaches the datapath again; why as for standDown.
func (m *falconMode) standUp(h *Host, why string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dp.Config().StoodDown {
		return nil
	}
	if err := m.dp.StandDown(false); err != nil {
		h.Log().Warn("come back", "err", err)
		return err
	}
	if !m.eng.Fresh(policy.MaxSampleGap(h.Opts.Interval)) {
		h.Log().Warn("come back: no fresh load sample yet; steering stays off until one comes")
	}
	if err := m.attachAll(h, m.ov, false); err != nil {
		h.Log().Warn("come back", "err", err)
		return err
	}
	if why != "" {
		h.Log().Info("back on the path", "why", why)
	}
	return nil
}

// startPath attaches the datapath, or, where the policy decides whether
// to steer (adaptive), starts stood down: it comes on the path only to
// engage, and a comeback attaches and sets RPS as Start does. Attached
// from the start, falcon cost every packet and set RPS for at least the
// second before its first stand-down, with nothing yet known to pay. The
// load sampler starts before anything attaches, and after the policy's
// start, which may find that nothing will ever need it (Engine.Sample).
// The context is for the engine's turns.
func (m *falconMode) startPath(h *Host, ov *discover.Overlay) (context.Context, error) {
	if m.eng.Always() {
		ctx, err := m.eng.Sample()
		if err != nil {
			return nil, err
		}
		return ctx, m.attachAll(h, ov, true)
	}
	if err := m.dp.StandDown(true); err != nil {
		return nil, err
	}
	if err := m.eng.Start(); err != nil {
		return nil, err
	}
	return m.eng.Sample()
}
