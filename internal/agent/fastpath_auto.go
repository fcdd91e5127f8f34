package agent

import (
	"github.com/falconnet/falcon/internal/discover"
)

// startFast starts the fast path beside steering where the options ask
// for it: fastpath=true where Check found it fits (it refused the mode
// otherwise), fastpath=auto wherever it fits now, at start and at every
// change of the overlay after. The host's rules are no reason to stay
// out: the running fast path judges them at every change and keeps its
// caches off while they are unsafe, so it comes on once they are safe.
// Why it does not run goes to the state, for status.
func (m *falconMode) startFast(h *Host, ov *discover.Overlay) error {
	if !h.Opts.Fastpath || m.fastOn {
		return nil
	}
	why := ""
	if h.Opts.FastpathAuto {
		if err := fastPathFits(h, ov); err != nil {
			why = err.Error()
		}
	}
	if why == "" {
		err := m.fast.start(h, ov)
		switch {
		case err == nil:
			m.fastOn = true
		case !h.Opts.FastpathAuto:
			return err
		default:
			why = err.Error()
		}
	}
	if why != m.fastWhy {
		m.fastWhy = why
		if why != "" {
			h.Log().Info("fast path not running: steering alone", "why", why)
		}
		return h.update(func(s *State) { s.FastpathWhy = why })
	}
	return nil
}
