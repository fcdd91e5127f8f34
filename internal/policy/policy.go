// Package policy decides when falcon engages: whether it is on the path
// and steering, on which CPUs, or stood down with every flow inline. A
// Policy takes one Window of readings per turn and answers a Verdict; the
// Engine reads the windows, asks the policy and carries the verdicts out
// through an Actuator, which the agent's falcon mode implements. A policy
// never touches the datapath: what it may do is what Actuator offers (the
// package names the datapath's per-packet choices, nothing more).
package policy

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/falconnet/falcon/internal/cause"
	"github.com/falconnet/falcon/internal/datapath"
)

// Policy decides one turn at a time. Turn and Done are called from one
// goroutine, the engine's loop: Turn with the turn's window, then, once
// the engine has carried the verdict out, Done with what came of it (nil
// where the switch was made, or there was none to make).
type Policy interface {
	Turn(w Window) Verdict
	Done(v Verdict, err error)
}

// Tester is a policy that measures before it decides: its Measure verdicts
// make the engine run the A/B windows and hand what they delivered to
// Judge, whose verdict the engine carries out like Turn's.
type Tester interface {
	Judge(t Test) Verdict
}

// Starter is a policy with something to settle once, stood down, before
// its first turn.
type Starter interface {
	Start() error
}

// Never is a policy that may know, once started, that it will never come
// on the path (a CPU set too small ever to hold a target: cause.Roomless);
// Never says why, "" where it may. The engine then takes no turns: each
// reads every CPU's counters, the namespaces' sockets and, every 2 s,
// every process's descriptors, about 1.5 % of a CPU on 2 vCPUs, spent on
// the CPUs it could not relieve.
type Never interface {
	Never() string
}

// Window is one turn's readings.
type Window struct {
	At time.Time
	// StoodDown: off the path, every program detached; Engaged: steering
	// (on the path, the datapath may move stages).
	StoodDown, Engaged bool
	// Load: the latest load sample, busy percent by CPU (nil before one).
	Load []uint32
	// Cause: the causes read since the last turn (internal/cause), for a
	// policy that reads them (Entry.Causes); nil otherwise.
	Cause *cause.Window
}

// Action is what a verdict asks the engine to do.
type Action string

const (
	Stay Action = "" // no switch
	// Engage: on the path (back from standing down) and steering.
	Engage Action = "engage"
	// Disengage: steering off, then off the path (a verdict against
	// steering).
	Disengage Action = "disengage"
	// StandDown: off the path, as steering is (nothing to do there).
	StandDown Action = "stand_down"
	// Measure: run the A/B windows (Tester).
	Measure Action = "test"
	// Pass: no verdict this turn; a policy composed after this one
	// decides it (adaptive: the A/B test where the causes are unreadable).
	Pass Action = "pass"
)

// Verdict is a turn's answer. Why goes to the log where not "".
type Verdict struct {
	Action Action
	// Aim: set Targets as the only CPUs steering may move stages to (nil:
	// any CPU of the set); without Aim the targets stay as they are.
	Aim     bool
	Targets []int
	Why     string
}

// Params are what a policy is made with: the options it decides by, and
// where it says and keeps what it decided.
type Params struct {
	Threshold int   // busy percent
	CPUs      []int // the set
	SplitCPUs []int // the split set (falcon+split)
	Log       *slog.Logger
	// Save updates the engagement's part of the agent's state file
	// (status): update gets the current one, nil before any, and returns
	// the new one.
	Save func(update func(*Engagement) *Engagement) error
	// Counters and Causes: the engine's, which the agent's metrics read.
	Counters *Counters
	Causes   *Log
}

// Set: the CPUs a stage may move to, the set and the split set.
func (p Params) Set() []int {
	set := slices.Clone(p.CPUs)
	for _, c := range p.SplitCPUs {
		if !slices.Contains(set, c) {
			set = append(set, c)
		}
	}
	slices.Sort(set)
	return set
}

// Entry is a registered policy.
type Entry struct {
	Name  string
	Usage string // for the policy setting's help
	// Datapath: the per-packet choice the datapath makes under the policy
	// (datapath.PolicyAdaptive, PolicyPaper, PolicyStatic).
	Datapath string
	// Always: on the path from the start and for good; the policy takes no
	// turns (the datapath's per-packet choice is all there is).
	Always bool
	// Causes: the engine reads the causes each turn (Window.Cause).
	Causes bool
	New    func(p Params) Policy
}

var (
	mu       sync.Mutex
	registry = map[string]Entry{}
)

func init() {
	for _, e := range builtin {
		Register(e)
	}
}

// Register adds a policy, until the function it returns takes it away (a
// test's policy); a name taken twice is a programming error.
func Register(e Entry) (unregister func()) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[e.Name]; dup || e.Name == "" {
		panic(fmt.Sprintf("policy %q registered twice", e.Name))
	}
	registry[e.Name] = e
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(registry, e.Name)
	}
}

// Default is the policy where none is named.
const Default = datapath.PolicyAdaptive

// Lookup returns the policy called name.
func Lookup(name string) (Entry, bool) {
	mu.Lock()
	defer mu.Unlock()
	e, ok := registry[name]
	return e, ok
}

// Names lists the registered policies, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Usage says each registered policy, for the setting's help.
func Usage() string {
	var parts []string
	for _, n := range Names() {
		e, _ := Lookup(n)
		parts = append(parts, n+": "+e.Usage)
	}
	return strings.Join(parts, "; ")
}

// builtin are the product's policies, one line each.
var builtin = []Entry{
	{Name: datapath.PolicyAdaptive, Datapath: datapath.PolicyAdaptive, Causes: true, New: newAdaptive,
		Usage: "move a stage only off a busy CPU onto one with room, and only while steering is measured to pay"},
	{Name: datapath.PolicyPaper, Datapath: datapath.PolicyPaper, Always: true, New: always, Usage: "FALCON's Algorithm 1 as published"},
	{Name: datapath.PolicyStatic, Datapath: datapath.PolicyStatic, Always: true, New: always,
		Usage: "Algorithm 1 without its second choice, the first hash choice busy or not (FALCON Fig. 16)"},
}

// Choices says the registered policies for an error: "a, b or c".
func Choices() string {
	n := Names()
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}
