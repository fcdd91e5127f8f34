package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/falconnet/falcon/internal/testbed"
)

// Mode is a way to run the datapath (vanilla, falcon, rps, …): a step
// between "testbed up" and "traffic". Setup changes the fresh testbed and
// returns undo, which bench calls when the testbed's cases are done — also
// after a failure or ctrl-C — before the testbed is torn down. undo may be
// nil when there is nothing to restore. Setup must either succeed or leave
// nothing behind.
type Mode interface {
	Name() string
	Setup(ctx context.Context, tb *testbed.Testbed) (undo func() error, err error)
}

// LayoutChecker is optionally implemented by a Mode that runs only on some
// layouts. A non-empty reason skips that layout × mode, with the reason
// shown to the user. Without it, a mode other than vanilla skips the host
// layout: there is no overlay there to change.
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

// RegisterMode makes a mode available to --modes. Datapath packages call it
// from init (or the command does, to keep bench free of their imports).
// It panics on an empty or duplicate name: that is a programming error.
func RegisterMode(m Mode) {
	modesMu.Lock()
	defer modesMu.Unlock()
	name := m.Name()
	if name == "" {
		panic("bench: RegisterMode with an empty name")
	}
	if _, dup := modes[name]; dup {
		panic(fmt.Sprintf("bench: mode %q registered twice", name))
	}
	modes[name] = m
}

// LookupMode returns a registered mode.
func LookupMode(name string) (Mode, bool) {
	modesMu.RLock()
	defer modesMu.RUnlock()
	m, ok := modes[name]
	return m, ok
}

// ModeNames lists the registered modes, sorted.
func ModeNames() []string {
	modesMu.RLock()
	defer modesMu.RUnlock()
	var n []string
	for k := range modes {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// vanilla is the kernel as it comes: nothing to set up.
type vanilla struct{}

func (vanilla) Name() string { return "vanilla" }

func (vanilla) Setup(context.Context, *testbed.Testbed) (func() error, error) { return nil, nil }

func (vanilla) Unsupported(string) string { return "" }

func init() { RegisterMode(vanilla{}) }

// unsupported says why a mode cannot run on a layout, or "".
func unsupported(mode, layout string) string {
	m, ok := LookupMode(mode)
	if !ok {
		return "mode not registered"
	}
	if lc, ok := m.(LayoutChecker); ok {
		return lc.Unsupported(layout)
	}
	if layout == "host" {
		return "the host layout has no overlay for this mode to change (host runs only in vanilla)"
	}
	return ""
}
