package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
)

// Mode is a way to run the datapath (vanilla, falcon, rps, …): a step
// between "testbed up" and "traffic". Setup changes the fresh testbed and
// returns what bench needs of it: Undo, which bench calls when the
// testbed's cases are done — also after a failure or ctrl-C — before the
// testbed is torn down. Setup must either succeed or leave nothing behind.
//
// The modes of --modes are the lab's (schema.ParseMode): "vanilla",
// "falcon:threshold=90", "falcon+split", "rps+", "vanilla@aa", …; tests add
// their own with RegisterMode.
type Mode interface {
	Name() string
	Setup(ctx context.Context, tb *testbed.Testbed) (SetUp, error)
}

// SetUp is a mode in force on a testbed.
type SetUp struct {
	Undo func() error // nil when there is nothing to restore
	// Activity, when set, reads what the mode's agent did so far; bench
	// reads it around every window (Run.Falcon).
	Activity func() agent.Activity
	// Causes, when set, returns the agent's turns decided by cause after
	// a sequence number (agent.CauseTrace), recorded per window.
	Causes func(seq uint64) []agent.CauseRecord
}

// LayoutChecker is optionally implemented by a Mode that runs only on some
// layouts. A non-empty reason skips that layout × mode, with the reason
// shown to the user. Without it, a mode other than vanilla skips the host
// layout: there is no overlay there to change. (Of the catalogue's, only
// falcon+split runs there: FALCON's Host+, the host's own NIC split.)
type LayoutChecker interface {
	Unsupported(layout string) (reason string)
}

// Preflighter is optionally implemented by a Mode that can tell before
// anything is created that it cannot run here (no BPF, no tool, …). bench
// calls it once for every mode on the command line, before any testbed.
type Preflighter interface {
	Preflight() error
}

var (
	modesMu sync.RWMutex
	modes   = map[string]Mode{}
)

// RegisterMode makes a mode outside the catalogue available to --modes
// (tests do). It panics on an empty or duplicate name, or one of the
// catalogue's: that is a programming error.
func RegisterMode(m Mode) {
	modesMu.Lock()
	defer modesMu.Unlock()
	name := m.Name()
	if name == "" {
		panic("bench: RegisterMode with an empty name")
	}
	_, dup := modes[name]
	if _, err := agentMode(name); dup || err == nil {
		panic(fmt.Sprintf("bench: mode %q registered twice", name))
	}
	modes[name] = m
}

// LookupMode returns the mode a --modes entry names: a registered one, or a
// spec of the agent's catalogue. Errors are *ConfigError.
func LookupMode(spec string) (Mode, error) {
	modesMu.RLock()
	m, ok := modes[spec]
	modesMu.RUnlock()
	if ok {
		return m, nil
	}
	am, err := agentMode(spec)
	if err != nil {
		return nil, &ConfigError{Msg: err.Error()}
	}
	return am, nil
}

// ModeNames lists the lab's modes and the registered ones, sorted.
func ModeNames() []string {
	n := schema.ModeNames()
	modesMu.RLock()
	defer modesMu.RUnlock()
	for k := range modes {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// catalogueMode runs a mode of the agent's catalogue on the receiving host
// (h2; for the RPS/RFS study, its server node, the only one it
// configured) with an in-process agent; vanilla runs none.
type catalogueMode struct {
	spec    string
	o       agent.Options
	vanilla bool
}

// agentMode reads a spec of the lab's modes (schema.ParseMode).
func agentMode(spec string) (catalogueMode, error) {
	m, err := schema.ParseMode(spec)
	if err != nil {
		return catalogueMode{}, err
	}
	return catalogueMode{spec: m.Spec, o: m.Opts, vanilla: m.Vanilla}, nil
}

func (m catalogueMode) Name() string { return m.spec }

func (m catalogueMode) Setup(ctx context.Context, tb *testbed.Testbed) (SetUp, error) {
	if m.vanilla {
		return SetUp{}, nil
	}
	o := m.o
	o.Netns = tb.Hosts[1].Netns
	if tb.Layout == "host" {
		// FALCON's Host+: the split takes the receiving host's own NIC.
		o.HostNICs = []string{tb.Hosts[1].NIC}
	}
	o.Log = slog.New(slog.DiscardHandler) // the bench's progress bar owns the terminal
	a, err := agent.Start(ctx, o)
	if err != nil {
		return SetUp{}, err
	}
	if !agent.BothWays(o) || tb.Layout == "host" {
		return SetUp{Undo: a.Stop, Activity: a.Activity, Causes: a.CauseTrace}, nil
	}
	// The fast path's egress half runs on the sending host.
	so := o
	so.Netns = tb.Hosts[0].Netns
	s, err := agent.Start(ctx, so)
	if err != nil {
		return SetUp{}, errors.Join(err, a.Stop())
	}
	return SetUp{Undo: func() error { return errors.Join(s.Stop(), a.Stop()) }, Activity: a.Activity, Causes: a.CauseTrace}, nil
}

func (m catalogueMode) Unsupported(layout string) string {
	if m.vanilla {
		return ""
	}
	what := agent.NeedsOverlay(m.o)
	switch {
	case what == "":
	case layout == "host" && m.o.Split && m.o.Batch == 0:
		// FALCON's Host+: the host's own NIC split (Setup names it).
	case layout == "host":
		return "the host layout has no overlay for " + what
	case layout == "vxlan" && m.o.ContainerLevel:
		return "the vxlan layout has no containers for the container level"
	}
	return ""
}

func (m catalogueMode) Preflight() error {
	if m.vanilla {
		return nil
	}
	return agent.Preflight(m.o)
}

// unsupported says why a mode cannot run on a layout, or "".
func unsupported(mode, layout string) string {
	m, err := LookupMode(mode)
	if err != nil {
		return err.Error()
	}
	if lc, ok := m.(LayoutChecker); ok {
		return lc.Unsupported(layout)
	}
	if layout == "host" {
		return "the host layout has no overlay for this mode to change (host runs vanilla, and falcon+split as FALCON's Host+)"
	}
	return ""
}
