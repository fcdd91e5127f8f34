package agent

import (
	"sort"
	"sync"

	"github.com/falconnet/falcon/internal/discover"
)

// ModeFalcon is the default mode: BPF steering of each stage.
const ModeFalcon = "falcon"

// Mode is what an agent does to an overlay. The agent owns discovery, the
// journal, the state files and the lifecycle; a mode only turns overlays
// into changes. falcon's rps and rfs modes (issue 5) plug in here with
// RegisterMode.
type Mode interface {
	// Check validates what the mode needs (kernel features, options,
	// the overlay found) without changing the system.
	Check(h *Host, o *discover.Overlay) error
	// Start sets the mode up for overlay o; anything it changes must go
	// through h.Apply (sysfs/procfs values) or be recorded with h.AddHooks
	// before it is made, so that Disable can undo it after a crash.
	Start(h *Host, o *discover.Overlay) error
	// Update follows a changed overlay (containers came or went). It is
	// called from one goroutine, never concurrently with Start or Stop.
	Update(h *Host, o *discover.Overlay) error
	// Ready reports whether the mode is fully working (for status --ready).
	Ready() bool
	// Stop undoes what Start and Update did, except the journaled values,
	// which the agent restores after Stop.
	Stop(h *Host) error
}

// ModeFactory makes a fresh Mode for one agent.
type ModeFactory func() Mode

var (
	modesMu sync.Mutex
	modes   = map[string]ModeFactory{ModeFalcon: func() Mode { return &falconMode{} }}
)

// RegisterMode adds a mode under name (falcon enable --mode NAME).
func RegisterMode(name string, f ModeFactory) {
	modesMu.Lock()
	defer modesMu.Unlock()
	modes[name] = f
}

func lookupMode(name string) (ModeFactory, bool) {
	modesMu.Lock()
	defer modesMu.Unlock()
	f, ok := modes[name]
	return f, ok
}

// ModeNames lists the registered modes.
func ModeNames() []string {
	modesMu.Lock()
	defer modesMu.Unlock()
	var out []string
	for n := range modes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
