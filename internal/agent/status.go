package agent

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// Report is what falcon status shows.
type Report struct {
	Netns   string `json:"netns"`
	Enabled bool   `json:"enabled"`
	Running bool   `json:"agent_running"`
	Ready   bool   `json:"ready"`
	Problem string `json:"problem,omitempty"`
	Pid     int    `json:"pid,omitempty"`
	Mode    string `json:"mode,omitempty"` // the implementation
	// ModeName: the catalogue's name of the mode ("auto", "falcon+split").
	ModeName     string     `json:"mode_name,omitempty"`
	Started      *time.Time `json:"started,omitempty"`
	CPUs         string     `json:"cpus,omitempty"`
	Threshold    int        `json:"threshold"`
	Interval     string     `json:"interval,omitempty"`
	Order        string     `json:"order,omitempty"`
	Policy       string     `json:"policy,omitempty"`
	GuardTimeout string     `json:"guard_timeout,omitempty"`
	// Steering: the datapath may move stages (policy paper, or adaptive
	// and measured to pay); false while falcon stepped aside.
	Steering bool `json:"steering"`
	// StoodDown: no CPU was busy, or steering did not pay, so every falcon
	// program is off the path until a CPU is busy (adaptive policy).
	StoodDown bool `json:"stood_down"`
	// Engagement: the adaptive policy's verdicts so far and the last one's
	// figures (why falcon is on or off the path).
	Engagement *Engagement   `json:"engagement,omitempty"`
	Load       *LoadReport   `json:"load,omitempty"`
	Stages     []StageReport `json:"stages,omitempty"`
	Totals     *Decisions    `json:"totals,omitempty"`
	Split      *SplitReport  `json:"split,omitempty"`
	// FastPath: the cached fast path's entries, hits, misses, the packets
	// it left to the slow path by reason, and invalidations.
	FastPath *FastReport `json:"fastpath,omitempty"`
	// FastpathWhy: why the fast path the mode asks for where it fits
	// (fastpath=auto) does not run.
	FastpathWhy string            `json:"fastpath_not_running,omitempty"`
	Devices     []discover.Device `json:"devices,omitempty"`
	// Static: a mode that only sets values (rps, rfs) is applied and no
	// agent runs, nor needs to; Values are what it set.
	Static bool    `json:"static,omitempty"`
	Values []Value `json:"values,omitempty"`
}

// LoadReport is the load the datapath decides with.
type LoadReport struct {
	PerCPU map[int]uint32 `json:"per_cpu"` // percent, by CPU id
	Avg    uint32         `json:"avg"`     // over the CPU set
	AgeMs  float64        `json:"age_ms"`  // since the last sample
	Stale  bool           `json:"stale"`   // too old: steering is off
}

// stale: the load is too old to steer with (none is not stale: nothing
// samples it where falcon never comes on the path).
func (l *LoadReport) stale() bool { return l != nil && l.Stale }

// Decisions counts the datapath's choices.
type Decisions struct {
	First         uint64            `json:"first"`
	Second        uint64            `json:"second"`
	Fallback      uint64            `json:"fallback"`
	FallbackStale uint64            `json:"fallback_stale"`
	FallbackIdle  uint64            `json:"fallback_idle"`  // adaptive: moving would not pay
	FlowletHits   uint64            `json:"flowlet_hits"`   // kept their flow's decision
	GuardHolds    uint64            `json:"guard_holds"`    // kept the old target: earlier packets still queued
	Moved         uint64            `json:"moved"`          // (flow, hook)s that changed target
	GuardTimeouts uint64            `json:"guard_timeouts"` // ... after the guard gave up on lost packets
	Passed        map[string]uint64 `json:"passed,omitempty"`
}

// StageReport is one hook: where the stage it sees ran, and where it sent
// the next one.
type StageReport struct {
	Device    string            `json:"device"`
	Netns     string            `json:"netns"`
	Role      datapath.HookRole `json:"role"`
	Steers    string            `json:"steers"` // the stage it chooses CPUs for
	RanOn     map[int]uint64    `json:"packets_per_cpu"`
	SteeredTo map[int]uint64    `json:"steered_to_cpu"`
	Decisions Decisions         `json:"decisions"`
	// DecisionsPerCPU splits Decisions by the CPU the hook ran on when it
	// decided (Passed stays per hook); CPUs without any are absent.
	DecisionsPerCPU map[int]Decisions `json:"decisions_per_cpu,omitempty"`
	Passed          map[string]uint64 `json:"-"`
}

// Status reports on the agent of opts.Netns. A namespace without an agent
// is no error: Enabled is false.
func Status(opts Options) (*Report, error) {
	key, err := Key(opts.Netns)
	if err != nil {
		return nil, err
	}
	dir := opts.stateDir(key)
	r := &Report{Netns: netns.Label(opts.Netns)}
	st, err := readState(dir)
	if err == nil && !running(dir) && recycled(st, opts.Netns) {
		err = os.ErrNotExist // a gone namespace's; the next enable or disable sweeps it
	}
	if errors.Is(err, os.ErrNotExist) {
		if running(dir) {
			r.Enabled, r.Running, r.Problem = true, true, "an agent is starting"
			return r, nil
		}
		// A name that is no namespace is a typo, not "not enabled".
		if err := netns.Check(opts.Netns); err != nil {
			return nil, err
		}
		return r, nil
	}
	if err != nil {
		r.Enabled, r.Running = true, running(dir)
		r.Problem = fmt.Sprintf("its state is unreadable (%v): 'falcon disable%s' restores the values its journal holds", err, NetnsFlag(opts.Netns))
		return r, nil
	}
	r.Enabled, r.Running = true, running(dir)
	r.fromOptions(st)
	r.Devices = st.Devices
	r.Static, r.Values, r.FastpathWhy = st.Static, st.Values, st.FastpathWhy
	if r.Running {
		r.FastPath = readFastReport(dir)
	}
	switch {
	case st.Static && !st.Ready && r.Running:
		r.Problem = fmt.Sprintf("mode %s is being applied", st.Options.Mode)
	case st.Static && !st.Ready:
		r.Problem = fmt.Sprintf("applying mode %s was interrupted half-way: run 'falcon disable%s' to restore, then enable again", st.Options.Mode, NetnsFlag(opts.Netns))
	case st.Static:
	case !r.Running:
		r.Problem = fmt.Sprintf("agent pid %d is gone (killed?) and left its changes behind: run 'falcon disable%s'", st.Pid, NetnsFlag(opts.Netns))
	case !st.Ready:
		r.Problem = "the agent is starting, or failed to undo its changes: see " + dir + "/" + LogFile
	}
	if impl, _ := lookupMode(st.Options.Mode); st.PinDir == "" || !impl.steers {
		// No steering maps to read (the fast path's report is read above).
		r.Ready = (r.Running || st.Static) && st.Ready
		return r, nil
	}
	cfg, perCPU, avg, updated, err := datapath.ReadState(st.PinDir)
	if err != nil {
		if r.Problem == "" {
			r.Problem = err.Error()
		}
		return r, nil
	}
	r.Steering = !cfg.StoodDown && (datapath.Unconditional(cfg.Policy) || cfg.Engaged)
	r.StoodDown = cfg.StoodDown
	r.Engagement = st.Engagement
	r.Load = loadReport(st.Engagement, cfg, perCPU, avg, updated)
	c, err := datapath.ReadCounters(st.PinDir)
	if err != nil {
		if r.Problem == "" {
			r.Problem = err.Error()
		}
		return r, nil
	}
	totals := decisions(c.Decided, c.Passed)
	r.Totals = &totals
	r.Stages = stageReports(c, st.Devices)
	r.Split = splitReport(st.Options, c)
	if r.Load.stale() && r.Problem == "" {
		r.Problem = "the load data is stale: steering is off (is the agent stalled?)"
	}
	// Stood down, falcon has no hook and is as ready as it means to be.
	r.Ready = r.Running && st.Ready && (len(c.Stages) > 0 || r.StoodDown) && !r.Load.stale()
	return r, nil
}

// stageReports are the hooks' stages, in packet order.
func stageReports(c datapath.Counters, devs []discover.Device) []StageReport {
	var out []StageReport
	for _, s := range c.Stages {
		sr := StageReport{
			Device: s.Hook.Name, Netns: netns.Label(s.Hook.Netns), Role: s.Hook.Role,
			Steers: steersWhat(s.Hook, devs), RanOn: s.RanOn, SteeredTo: s.SteeredTo,
			Decisions: decisions(s.Decided, s.Passed), DecisionsPerCPU: map[int]Decisions{},
		}
		for cpu, d := range s.PerCPU {
			sr.DecisionsPerCPU[cpu] = decisions(d, nil)
		}
		out = append(out, sr)
	}
	// In packet order: XDP on the NIC, the NIC's tc hook, the VXLAN devices'.
	order := map[datapath.HookRole]int{datapath.HookSplit: 0, datapath.HookOnNIC: 1}
	rank := func(role datapath.HookRole) int {
		if o, ok := order[role]; ok {
			return o
		}
		return 2
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].Role) < rank(out[j].Role) })
	return out
}

// loadReport is the load the datapath decides with, and how old it is;
// nil where falcon will never come on the path (e), which samples no load
// (policy.Engine.Sample).
func loadReport(e *Engagement, cfg datapath.Config, perCPU []uint32, avg uint32, updated uint64) *LoadReport {
	if e != nil && e.Never != "" {
		return nil
	}
	l := &LoadReport{PerCPU: map[int]uint32{}, Avg: avg}
	for cpu, v := range perCPU {
		l.PerCPU[cpu] = v
	}
	if updated == 0 {
		l.Stale = true
	} else {
		age := time.Duration(monotonicNs() - updated)
		l.AgeMs = float64(age.Microseconds()) / 1000
		l.Stale = cfg.StaleAfter > 0 && age > cfg.StaleAfter
	}
	return l
}

// fromOptions fills in what the agent was started with.
func (r *Report) fromOptions(st *State) {
	r.Pid, r.Mode, r.ModeName = st.Pid, st.Options.Mode, ModeName(st.Options)
	r.Started = &st.Started
	r.CPUs = cpuset.Format(st.Options.CPUs)
	r.Threshold = st.Options.Threshold
	r.Interval = st.Options.Interval.String()
	r.Policy = st.Options.Policy
	r.GuardTimeout = st.Options.GuardTimeout.String()
	r.Order = "guarded"
	if st.Options.PerPacket {
		r.Order = "per-packet"
	}
}

// steersWhat names the stage a hook chooses CPUs for.
func steersWhat(h datapath.Hook, devs []discover.Device) string {
	if h.Role == datapath.HookOnOverlay {
		return "containers"
	}
	if h.Role == datapath.HookSplit {
		return h.Name + " (cpumap)"
	}
	for _, d := range devs {
		if d.Role == discover.RoleOverlay && d.Ifindex == h.NextIfindex {
			return d.Name
		}
	}
	return fmt.Sprintf("ifindex %d", h.NextIfindex)
}

func monotonicNs() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

func decisions(d datapath.Decided, passed map[string]uint64) Decisions {
	return Decisions{First: d.First, Second: d.Second, Fallback: d.Fallback, FallbackStale: d.FallbackStale,
		FallbackIdle: d.FallbackIdle, FlowletHits: d.FlowletHits, GuardHolds: d.Holds, Moved: d.Moved,
		GuardTimeouts: d.Timeouts, Passed: passed}
}
