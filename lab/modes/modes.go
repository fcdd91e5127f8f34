// Package modes sets a datapath mode up on a testbed and undoes it: the
// lab's modes (vanilla, and the agent's catalogue run by an in-process
// agent on the receiving host), the ones tests register, which layouts
// each can run on, and what its agent did over a window (activity.go).
// bench runs its cases under them.
package modes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
// their own with Register.
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

// Register makes a mode outside the catalogue available to --modes
// (tests do). It panics on an empty or duplicate name, or one of the
// catalogue's: that is a programming error.
func Register(m Mode) {
	modesMu.Lock()
	defer modesMu.Unlock()
	name := m.Name()
	if name == "" {
		panic("modes: Register with an empty name")
	}
	_, dup := modes[name]
	if _, err := agentMode(name); dup || err == nil {
		panic(fmt.Sprintf("modes: mode %q registered twice", name))
	}
	modes[name] = m
}

// Lookup returns the mode a --modes entry names: a registered one, or a
// spec of the agent's catalogue.
func Lookup(spec string) (Mode, error) {
	modesMu.RLock()
	m, ok := modes[spec]
	modesMu.RUnlock()
	if ok {
		return m, nil
	}
	am, err := agentMode(spec)
	if err != nil {
		return nil, err
	}
	return am, nil
}

// Names lists the lab's modes and the registered ones, sorted.
func Names() []string {
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
	return SetUp{Undo: func() error { return errors.Join(s.Stop(), a.Stop()) }, Activity: withFast(a.Activity, s.Activity), Causes: a.CauseTrace}, nil
}

func (m catalogueMode) Unsupported(layout string) string {
	if m.vanilla {
		return ""
	}
	what := agent.NeedsOverlay(m.o)
	switch {
	case layout == "k8s-cilium":
		// Cilium's agents own that datapath's hooks and devices; the
		// layout is what falcon is compared with, not a place to run it.
		return "k8s-cilium is Cilium's own datapath, the comparison: falcon's modes do not run on it"
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

// NeedsBPF says what a mode needs of the kernel before any testbed: BPF in
// tc (falcon's modes), XDP (its split); false for a mode it cannot read.
func NeedsBPF(spec string) (bpf, xdp bool) {
	m, err := Lookup(spec)
	if err != nil {
		return false, false
	}
	cm, ok := m.(catalogueMode)
	if !ok || cm.o.Mode != agent.ModeFalcon {
		return false, false
	}
	return true, cm.o.Split
}

// Unsupported says why a mode cannot run on a layout, or "".
func Unsupported(mode, layout string) string {
	m, err := Lookup(mode)
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

// WithFalconCPUs gives a catalogue mode the bench's Falcon set wherever its
// spec left the CPUs open: falcon's CPU set (and so its split's), and the
// CPUs rps writes to rps_cpus (the study's default is every CPU, the
// senders' included, which here are another machine). RFS steers to the
// applications' CPUs and takes no set. A mode's own setting wins:
// "falcon:cpus=4-5" keeps 4-5.
func WithFalconCPUs(m Mode, cpus []int) Mode {
	cm, ok := m.(catalogueMode)
	if !ok || cpus == nil {
		return m
	}
	switch cm.o.Mode {
	case agent.ModeFalcon:
		if cm.o.CPUs == nil {
			cm.o.CPUs = slices.Clone(cpus)
		}
	case agent.ModeRPS:
		if cm.o.RPSCPUs == nil {
			cm.o.RPSCPUs = slices.Clone(cpus)
		}
	}
	return cm
}
