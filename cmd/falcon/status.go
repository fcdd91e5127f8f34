package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/netns"
)

func init() {
	register(command{name: "status", summary: "show whether falcon runs, its settings, CPU load and per-stage counters", run: runStatus})
}

// statusOut is where the report goes; tests capture it.
var statusOut io.Writer = os.Stdout

// errNotReady makes status --ready exit 1 with a reason and nothing else.
var errNotReady = errors.New("not ready")

func runStatus(args []string) error {
	fs := newFlagSet("status", "[--netns HOSTNS] [--json] [--ready]")
	ns := fs.String("netns", "", "host network namespace (name under /run/netns or a path; default: the current one)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	ready := fs.Bool("ready", false, "exit 0 only if an agent runs, is attached and has fresh load data (a readiness probe)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := agent.DefaultOptions()
	o.Netns = *ns
	r, err := agent.Status(o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(statusOut)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if !*ready {
		writeStatus(statusOut, r)
	}
	if *ready && !r.Ready {
		why := r.Problem
		if !r.Enabled {
			why = "falcon is not enabled"
		}
		return fmt.Errorf("%w: %s", errNotReady, why)
	}
	if *ready && !*asJSON {
		if r.Static {
			fmt.Fprintf(statusOut, "ready: mode %s applied (no agent needed)\n", r.Mode)
		} else {
			fmt.Fprintf(statusOut, "ready: agent pid %d\n", r.Pid)
		}
	}
	return nil
}

func writeStatus(w io.Writer, r *agent.Report) {
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
		fmt.Fprintf(w, "  agent      pid %d, mode %s%s\n", r.Pid, r.Mode, up)
	}
	if r.Mode == agent.ModeFalcon {
		order := r.Order
		if order == "guarded" {
			order += " (timeout " + r.GuardTimeout + ")"
		}
		fmt.Fprintf(w, "  CPU set    %s   threshold %d%%   policy %s   order %s   load sampled every %s\n", r.CPUs, r.Threshold, r.Policy, order, r.Interval)
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
	if t := r.Totals; t != nil {
		fmt.Fprintf(w, "  decisions  first %d, second %d, fallback %d (stale load %d, not paying %d), kept %d%s\n",
			t.First, t.Second, t.Fallback, t.FallbackStale, t.FallbackIdle, t.FlowletHits, passed(t.Passed))
		fmt.Fprintf(w, "  guard      moved %d, held %d packets until earlier ones arrived, timeouts %d\n",
			t.Moved, t.GuardHolds, t.GuardTimeouts)
	}
	if len(r.Stages) > 0 {
		fmt.Fprintln(w, "\nstages (a hook sees one stage and picks the CPU of the next):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  DEVICE\tNETNS\tROLE\tSTEERS\tPACKETS PER CPU\tSTEERED TO CPU\tFIRST\tSECOND\tFALLBACK\tHELD\tTIMEOUTS")
		for _, s := range r.Stages {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", s.Device, s.Netns, s.Role, s.Steers,
				perCPU(s.RanOn, "%d"), perCPU(s.SteeredTo, "%d"), s.Decisions.First, s.Decisions.Second, s.Decisions.Fallback,
				s.Decisions.GuardHolds, s.Decisions.GuardTimeouts)
		}
		tw.Flush()
	}
	writeSplit(w, r.Split)
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
// at its full queue, turned into skbs by its kthread, and how often that
// kthread ran and slept.
func writeSplit(w io.Writer, sp *agent.SplitReport) {
	if sp == nil {
		return
	}
	fmt.Fprintf(w, "\nsplit NIC stage (XDP redirects into a cpumap), CPUs %s, inner protocol %s:\n", sp.CPUs, sp.Proto)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CPU\tQUEUED\tQUEUE DROPS\tSKBS BUILT\tBUILD DROPS\tKTHREAD BATCHES\tKTHREAD SLEEPS\tREDIRECT FAILED")
	cpus := make([]int, 0, len(sp.PerCPU))
	for c := range sp.PerCPU {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	for _, c := range cpus {
		s := sp.PerCPU[c]
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c, s.Enqueued, s.EnqueueDrops, s.Built, s.BuildDrops,
			s.Batches, s.Sleeps, s.RedirectFail)
	}
	tw.Flush()
}
