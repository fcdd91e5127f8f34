// Package top is falcon top: a live view of one host namespace, drawn
// from the same reports as falcon status, a frame a second.
package top

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
)

// Style colours parts of a frame; the zero Style writes plain text, as
// --once does for scripts.
type Style struct {
	Title, Busy, Room, Warn, Dim func(string) string
}

func (s Style) apply(f func(string) string, v string) string {
	if f == nil {
		return v
	}
	return f(v)
}

// Sample is one report and when it was read.
type Sample struct {
	Report *agent.Report
	At     time.Time
}

// Render draws a frame of width columns from the latest sample; rates come
// from the one before it (nil: totals only).
func Render(prev, cur *Sample, width int, st Style) string {
	var b strings.Builder
	r := cur.Report
	dt := 0.0
	if prev != nil && prev.Report != nil {
		dt = cur.At.Sub(prev.At).Seconds()
	}
	rate := func(now, before uint64) string {
		if dt <= 0 || now < before {
			return "-"
		}
		return human(float64(now-before) / dt)
	}
	steering := st.apply(st.Room, "steering")
	switch {
	case r.StoodDown:
		steering = st.apply(st.Warn, "stood down (off the path)")
	case !r.Steering:
		steering = st.apply(st.Warn, "stepped aside")
	}
	fmt.Fprintf(&b, "%s  netns %s  mode %s  policy %s  threshold %d%%  CPU set %s  %s\n",
		st.apply(st.Title, "falcon top"), r.Netns, r.Mode, r.Policy, r.Threshold, r.CPUs, steering)
	if r.Problem != "" {
		b.WriteString(st.apply(st.Warn, "problem: "+r.Problem) + "\n")
	}
	if r.Load == nil {
		return b.String()
	}
	var before *agent.Report
	if prev != nil {
		before = prev.Report
	}
	b.WriteString("\n")
	writeCPUs(&b, r, before, width, st, rate)
	b.WriteString("\n")
	writeTotals(&b, r, before, rate)
	age := fmt.Sprintf("load %.1f ms old", r.Load.AgeMs)
	if r.Load.Stale {
		age = st.apply(st.Warn, "load STALE: steering is off")
	}
	fmt.Fprintf(&b, "\n%s\n", st.apply(st.Dim, age+"   rates over "+fmt.Sprintf("%.1f s", dt)+"   q quits"))
	return b.String()
}

// writeCPUs draws a load bar per CPU and the stages it ran since the last
// frame: the stage a hook sees ran where the hook counted it, and the stage
// after the VXLAN device's hook ran where it was steered.
func writeCPUs(b *strings.Builder, r, before *agent.Report, width int, st Style, rate func(uint64, uint64) string) {
	cpus := make([]int, 0, len(r.Load.PerCPU))
	for c := range r.Load.PerCPU {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	set, _ := cpuset.Parse(r.CPUs)
	bar := min(max(width-70, 10), 40)
	fmt.Fprintf(b, "%-5s %-*s %5s  %s\n", "CPU", bar+2, "LOAD", "", "STAGES RUN (packets/s)")
	for _, c := range cpus {
		load := int(r.Load.PerCPU[c])
		n := min(bar, load*bar/100)
		fill := strings.Repeat("#", n)
		if load >= r.Threshold {
			fill = st.apply(st.Busy, fill)
		} else {
			fill = st.apply(st.Room, fill)
		}
		mark := " "
		if !slices.Contains(set, c) {
			mark = st.apply(st.Dim, "-") // not in the set: runs no steered stage
		}
		fmt.Fprintf(b, "cpu%-2d%s[%s%s] %3d%%  %s\n", c, mark, fill, strings.Repeat(".", bar-n), load, stagesOn(c, r, before, rate))
	}
}

func stagesOn(cpu int, r, before *agent.Report, rate func(uint64, uint64) string) string {
	var parts []string
	for _, s := range r.Stages {
		old := stageIn(before, s)
		var name string
		switch s.Role {
		case datapath.HookSplit:
			continue // the NIC's tc hook counts the same stage after the split
		case datapath.HookOnNIC:
			name = "nic " + s.Device
		default:
			name = s.Device
		}
		add := func(name string, now, was uint64) {
			// A stage that ran here once but not since the last frame is
			// history, not what the CPU runs.
			if now > 0 && (before == nil || now != was) {
				parts = append(parts, name+" "+rate(now, was))
			}
		}
		add(name, s.RanOn[cpu], old.RanOn[cpu])
		if s.Role == datapath.HookOnOverlay {
			add("containers", s.SteeredTo[cpu], old.SteeredTo[cpu])
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " · ")
}

// stageIn finds a hook's earlier counters (zero when it is new).
func stageIn(r *agent.Report, s agent.StageReport) agent.StageReport {
	if r != nil {
		for _, o := range r.Stages {
			if o.Device == s.Device && o.Netns == s.Netns && o.Role == s.Role {
				return o
			}
		}
	}
	return agent.StageReport{}
}

func writeTotals(b *strings.Builder, r, before *agent.Report, rate func(uint64, uint64) string) {
	var was agent.Decisions
	if before != nil && before.Totals != nil {
		was = *before.Totals
	}
	t := r.Totals
	if t == nil {
		return
	}
	var steered, steeredWas uint64
	for _, s := range r.Stages {
		for _, n := range s.SteeredTo {
			steered += n
		}
		for _, n := range stageIn(before, s).SteeredTo {
			steeredWas += n
		}
	}
	// A hook counts every packet it decides on by the CPU of its next
	// stage, inline ones on their own CPU: the decisions, not the moves.
	fmt.Fprintf(b, "%-12s%8s/s   total %s packets given their next stage's CPU (inline ones on their own)\n",
		"decided", rate(steered, steeredWas), human(float64(steered)))
	fmt.Fprintf(b, "%-12s%8s/s   total %s (stale load %s, not paying %s)\n", "fallback", rate(t.Fallback, was.Fallback),
		human(float64(t.Fallback)), human(float64(t.FallbackStale)), human(float64(t.FallbackIdle)))
	fmt.Fprintf(b, "%-12s%8s/s   total %s, %s after a guard timeout; %s packets held until earlier ones arrived\n",
		"flows moved", rate(t.Moved, was.Moved), human(float64(t.Moved)), human(float64(t.GuardTimeouts)), human(float64(t.GuardHolds)))
}

// human writes 1234567 as 1.23M.
func human(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
