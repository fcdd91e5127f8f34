package agent

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
)

// WhyNotReady says why a report that is not Ready is not.
func (r *Report) WhyNotReady() string {
	if !r.Enabled {
		return "falcon is not enabled"
	}
	return r.Problem
}

// WhyNotAlive says why the agent is wedged, "" if it is not (falcon status
// --alive, a liveness probe: the kubelet restarts a wedged agent). Looser
// than WhyNotReady on purpose: an agent that is starting, waits for its
// overlay or stood down is alive, and a restart would only restore and
// reapply every value; one whose process is gone, or whose load sampler
// stopped (steering is off until the agent restarts), is not.
func (r *Report) WhyNotAlive() string {
	switch {
	case !r.Enabled:
		return "falcon is not enabled: no agent has started"
	case !r.Running && !r.Static:
		return r.Problem
	case r.Load.stale():
		return "the load data is stale: the agent's load sampler has stopped"
	}
	return ""
}

// WriteReady writes the line of falcon status --ready for a ready report.
func (r *Report) WriteReady(w io.Writer) {
	if r.Static {
		fmt.Fprintf(w, "ready: mode %s applied (no agent needed)\n", r.Mode)
	} else {
		fmt.Fprintf(w, "ready: agent pid %d%s\n", r.Pid, map[bool]string{true: " (stood down: off the path)"}[r.StoodDown])
	}
}

// WriteText writes the report as falcon status prints it.
func (r *Report) WriteText(w io.Writer) {
	if !r.Enabled {
		fmt.Fprintf(w, "falcon is not enabled in network namespace %s\n", r.Netns)
		return
	}
	state := "ready"
	if !r.Ready {
		state = "NOT READY"
	}
	fmt.Fprintf(w, "falcon is enabled in network namespace %s: %s\n", r.Netns, state)
	if r.Problem != "" {
		fmt.Fprintf(w, "  problem    %s\n", r.Problem)
	}
	up := ""
	if r.Started != nil && !r.Started.IsZero() {
		up = ", up " + time.Since(*r.Started).Round(time.Second).String()
	}
	if r.Static {
		ago := ""
		if r.Started != nil && !r.Started.IsZero() {
			ago = ", set " + time.Since(*r.Started).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(w, "  agent      none needed (mode %s only sets values%s)\n", r.Mode, ago)
	} else {
		fmt.Fprintf(w, "  agent      pid %d, mode %s%s\n", r.Pid, cmp.Or(r.ModeName, r.Mode), up)
	}
	if r.Mode == ModeFalcon {
		order := r.Order
		if order == "guarded" {
			order += " (timeout " + r.GuardTimeout + ")"
		}
		sampled := "load sampled every " + r.Interval
		if e := r.Engagement; e != nil && e.Never != "" {
			sampled = "load not sampled (never on the path)"
		}
		fmt.Fprintf(w, "  CPU set    %s   threshold %d%%   policy %s   order %s   %s\n", r.CPUs, r.Threshold, r.Policy, order, sampled)
	}
	writeValues(w, r.Values)
	if l := r.Load; l != nil {
		fmt.Fprintf(w, "  load       %s   average %d%%", perCPU(l.PerCPU, "%d%%"), l.Avg)
		if l.Stale {
			fmt.Fprintf(w, "   STALE (%.0f ms old: steering is off)\n", l.AgeMs)
		} else {
			fmt.Fprintf(w, "   (%.1f ms ago)\n", l.AgeMs)
		}
	}
	if e := r.Engagement; e != nil && e.Never != "" {
		fmt.Fprintf(w, "  path       never on it: %s\n", e.Never)
	} else if r.StoodDown {
		fmt.Fprintf(w, "  path       off: no CPU busy, or steering did not pay; no falcon program runs until a CPU is busy (after a verdict against steering: until the next test)\n")
	}
	if r.FastpathWhy != "" {
		fmt.Fprintf(w, "  fast path  not running, steering alone: %s\n", r.FastpathWhy)
	}
	writeEngagement(w, r.Engagement)
	if t := r.Totals; t != nil {
		fmt.Fprintf(w, "  decisions  first %d, second %d, fallback %d (stale load %d, not paying %d), kept %d%s\n",
			t.First, t.Second, t.Fallback, t.FallbackStale, t.FallbackIdle, t.FlowletHits, passed(t.Passed))
		fmt.Fprintf(w, "  guard      moved %d, held %d packets until earlier ones arrived, timeouts %d\n",
			t.Moved, t.GuardHolds, t.GuardTimeouts)
	}
	writeStages(w, r.Stages)
	writeSplit(w, r.Split)
	writeFast(w, r.FastPath)
	if len(r.Devices) > 0 {
		fmt.Fprintln(w, "\noverlay:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, d := range r.Devices {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Role, d.Name, netns.Label(d.Netns))
		}
		tw.Flush()
	}
}

// perCPU writes "cpu0 12 cpu1 40", CPUs in order, or "-".
func perCPU[V uint32 | uint64](m map[int]V, format string) string {
	if len(m) == 0 {
		return "-"
	}
	cpus := make([]int, 0, len(m))
	for c := range m {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	parts := make([]string, 0, len(cpus))
	for _, c := range cpus {
		parts = append(parts, fmt.Sprintf("cpu%d "+format, c, m[c]))
	}
	return strings.Join(parts, " ")
}

func passed(m map[string]uint64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return ", passed untouched: " + strings.Join(parts, ", ")
}

// writeSplit shows each split CPU's cpumap: frames queued to it, dropped
// by the split program before the queue could fill or at its full queue,
// turned into skbs by its kthread, and how often that
// kthread ran and slept.
func writeSplit(w io.Writer, sp *SplitReport) {
	if sp == nil {
		return
	}
	fmt.Fprintf(w, "\nsplit NIC stage (XDP redirects into a cpumap), CPUs %s, inner protocol %s:\n", sp.CPUs, sp.Proto)
	if m := sp.Micro; m != nil {
		udp := "UDP flows not split (they keep one CPU)"
		if m.UDP {
			udp = "UDP flows split too: their packets may reach the socket out of order"
		}
		var full uint64
		for _, c := range sp.PerCPU {
			full += c.FullInline
		}
		fmt.Fprintf(w, "  micro-flows of %d packets for flows from %s bit/s (TCP reorders them back; %s): %d started, "+
			"%d packets split (%d of them built on the interrupt CPU: their queue was full), %d left inline after\n",
			m.Batch, m.Elephant, udp, m.Started, m.SplitPackets, full, m.InlinePackets)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CPU\tQUEUED\tQUEUE FULL\tQUEUE DROPS\tSKBS BUILT\tBUILD DROPS\tKTHREAD BATCHES\tKTHREAD SLEEPS\tREDIRECT FAILED")
	cpus := make([]int, 0, len(sp.PerCPU))
	for c := range sp.PerCPU {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	for _, c := range cpus {
		s := sp.PerCPU[c]
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c, s.Enqueued, s.QueueFull, s.EnqueueDrops, s.Built, s.BuildDrops,
			s.Batches, s.Sleeps, s.RedirectFail)
	}
	tw.Flush()
}

// writeValues lists what the rps and rfs modes set: the global values, then
// each device's queues, in one line per device.
func writeValues(w io.Writer, vs []Value) {
	if len(vs) == 0 {
		return
	}
	type dev struct{ netns, name, role string }
	var order []dev
	attrs := map[dev]map[string][]string{}
	fmt.Fprintln(w, "\nvalues set (restored by 'falcon disable'):")
	for _, v := range vs {
		name := v.Path[strings.LastIndex(v.Path, "/")+1:]
		if v.Device == "" {
			fmt.Fprintf(w, "  %s = %s (global)\n", name, v.Value)
			continue
		}
		d := dev{v.Netns, v.Device, v.Role}
		if attrs[d] == nil {
			attrs[d] = map[string][]string{}
			order = append(order, d)
		}
		attrs[d][name] = append(attrs[d][name], v.Value)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  DEVICE\tNETNS\tROLE\tQUEUES\tRPS_CPUS\tRPS_FLOW_CNT")
	for _, d := range order {
		a := attrs[d]
		n := max(len(a["rps_cpus"]), len(a["rps_flow_cnt"]))
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", d.name, netns.Label(d.netns), d.role, n, sameOrList(a["rps_cpus"]), sameOrList(a["rps_flow_cnt"]))
	}
	tw.Flush()
}

// sameOrList writes one value for all queues, or each queue's; "-" when
// the attribute was left alone.
func sameOrList(vs []string) string {
	if len(vs) == 0 {
		return "-"
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			return strings.Join(vs, ",")
		}
	}
	return vs[0]
}

// SummarizeValues says in a few words what was set: "rps_cpus 3 on 5
// devices, rps_sock_flow_entries 32768".
func SummarizeValues(vs []Value) string {
	type attr struct{ name, value string }
	devs := map[attr]map[string]bool{}
	var order []attr
	var global []string
	for _, v := range vs {
		name := v.Path[strings.LastIndex(v.Path, "/")+1:]
		if v.Device == "" {
			global = append(global, name+" "+v.Value)
			continue
		}
		a := attr{name, v.Value}
		if devs[a] == nil {
			devs[a] = map[string]bool{}
			order = append(order, a)
		}
		devs[a][v.Netns+"/"+v.Device] = true
	}
	var parts []string
	for _, a := range order {
		parts = append(parts, fmt.Sprintf("%s %s on %d device(s)", a.name, a.value, len(devs[a])))
	}
	parts = append(parts, global...)
	if len(parts) == 0 {
		return "every value was already as wanted"
	}
	return strings.Join(parts, ", ")
}

// relative is a against b in percent, signed.
func relative(a, b uint64) string {
	if b == 0 {
		return "no traffic off the path"
	}
	return fmt.Sprintf("%+.1f %%", (float64(a)/float64(b)-1)*100)
}

// writeFast shows the fast path: what it cached and carried, and why the
// packets it left to the slow path went there.
func writeFast(w io.Writer, f *FastReport) {
	if f == nil {
		return
	}
	c := f.Counters
	counted := ""
	if age := f.Updated.Sub(f.EntriesCounted); !f.EntriesCounted.IsZero() && age > 2*time.Second {
		counted = fmt.Sprintf(" (counted %v earlier: full caches are counted less often)", age.Round(time.Second))
	}
	fmt.Fprintf(w, "fast path: %d ingress and %d egress entries%s, generation %d (%d invalidations), on %d devices\n",
		f.IngressEntries, f.EgressEntries, counted, f.Generation, f.Invalidations, len(f.Hooks))
	fmt.Fprintf(w, "  shares: %d entries and new pending records a second per container, %d per remote host\n",
		f.ShareContainer, f.ShareRemote)
	if f.LearnedFlushes+f.LearnedWaited > 0 {
		fmt.Fprintf(w, "  learned neighbours and FDB entries: %d invalidations (at most one a second), %d announcements waited for one\n",
			f.LearnedFlushes, f.LearnedWaited)
	}
	fmt.Fprintf(w, "  ingress: %d hits, %d misses, %d learned; egress: %d hits, %d misses, %d learned\n",
		c["ingress_hit"], c["ingress_miss"], c["ingress_learned"], c["egress_hit"], c["egress_miss"], c["egress_learned"])
	if why := datapath.SlowCounted(c); len(why) > 0 {
		fmt.Fprintf(w, "  left to the slow path: %s\n", strings.Join(why, ", "))
	}
	for _, u := range f.Unreachable {
		fmt.Fprintf(w, "  not fast-pathed: %s\n", u)
	}
	for _, u := range f.SlowAggregates {
		fmt.Fprintf(w, "  TCP aggregates by the slow path: %s\n", u)
	}
	if len(f.SenderRPS) > 0 {
		fmt.Fprintf(w, "  RPS set on %d host-side veths, so that what their containers send leaves in order (%d packets sent on another CPU than their flow's home waited on its backlog)\n",
			len(f.SenderRPS), c["send_moved"])
	}
	if f.Off != "" {
		fmt.Fprintf(w, "  OFF: %s\n", f.Off)
	}
	writeConntrack(w, f.Conntrack)
}

// writeConntrack shows how the host's conntrack is kept in step.
func writeConntrack(w io.Writer, c *datapath.CtReport) {
	switch {
	case c == nil:
	case !c.Tracked:
		fmt.Fprintln(w, "  conntrack: the namespace tracks no connections")
	case c.Established:
		fmt.Fprintf(w, "  conntrack: kept in step, established only (the rules queue new packets to user space): %d flows let on once established, %d entries renewed (every %s), %d flows sent back to the slow path, %d requests failed\n",
			c.Kept, c.Renewed, c.Period, c.Forgotten, c.Failed)
	default:
		fmt.Fprintf(w, "  conntrack: kept in step: %d TCP flows let on (liberal), %d entries renewed (every %s), %d flows sent back to the slow path, %d requests failed\n",
			c.Kept, c.Renewed, c.Period, c.Forgotten, c.Failed)
	}
}

// writeStages shows each hook: where its stage ran and where it sent the next.
func writeStages(w io.Writer, stages []StageReport) {
	if len(stages) == 0 {
		return
	}
	fmt.Fprintln(w, "\nstages (a hook sees one stage and picks the CPU of the next):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  DEVICE\tNETNS\tROLE\tSTEERS\tPACKETS PER CPU\tSTEERED TO CPU\tFIRST\tSECOND\tFALLBACK\tHELD\tTIMEOUTS")
	for _, s := range stages {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", s.Device, s.Netns, s.Role, s.Steers,
			perCPU(s.RanOn, "%d"), perCPU(s.SteeredTo, "%d"), s.Decisions.First, s.Decisions.Second, s.Decisions.Fallback,
			s.Decisions.GuardHolds, s.Decisions.GuardTimeouts)
	}
	tw.Flush()
}

// writeEngagement shows the engagement test's verdicts and the last one's figures.
func writeEngagement(w io.Writer, e *Engagement) {
	if e == nil {
		return
	}
	if e.Tests == 0 || e.Last.IsZero() {
		fmt.Fprintf(w, "  engaging   no verdict yet\n")
		return
	}
	verdict := "off the path"
	if e.Steer {
		verdict = "steering"
	}
	again := ""
	if !e.Steer && !e.Again.IsZero() {
		again = fmt.Sprintf("; tests the busy spell again in %s", max(time.Until(e.Again), 0).Round(time.Second))
	}
	fmt.Fprintf(w, "  engaging   verdicts %d, for steering %d; the last (%s ago): %s, delivered %d steering against %d off the path (%s)%s\n",
		e.Tests, e.ForSteering, time.Since(e.Last).Round(100*time.Millisecond), verdict, e.Steering, e.Off, relative(e.Steering, e.Off), again)
}
