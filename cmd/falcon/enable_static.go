package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/netns"
)

// applyStatic enables a mode that only sets values (rps, rfs): they are
// set here, journaled, and nothing is left running. An agent running in the
// namespace (of any mode) is stopped first.
func applyStatic(o agent.Options) error {
	st, err := agent.Running(o)
	if err != nil {
		return err
	}
	if st != nil {
		fmt.Printf("falcon runs in network namespace %s (mode %s, agent pid %d): replacing it\n", netns.Label(o.Netns), st.Options.Mode, st.Pid)
		if _, err := agent.Disable(o); err != nil {
			return fmt.Errorf("stop the running agent: %w", err)
		}
	}
	// The summary below says what was set; of the log only warnings (from
	// discovery) and the undoing of earlier settings are news.
	l := log.New(os.Stderr, "falcon enable: ", 0)
	o.Logf = func(format string, a ...any) {
		if msg := fmt.Sprintf(format, a...); strings.HasPrefix(msg, "warning") || strings.HasPrefix(msg, "restoring") {
			l.Print(msg)
		}
	}
	applied, err := agent.Apply(o)
	if err != nil {
		return err
	}
	fmt.Printf("falcon enabled in network namespace %s (mode %s): %s; no agent runs, 'falcon status' lists every value, 'falcon disable%s' restores them\n",
		netns.Label(o.Netns), o.Mode, summarizeValues(applied.Values), netnsFlag(o.Netns))
	return nil
}

// summarizeValues says in a few words what was set: "rps_cpus 3 on 5
// devices, rps_sock_flow_entries 32768".
func summarizeValues(vs []agent.Value) string {
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

func netnsFlag(ns string) string {
	if ns == "" {
		return ""
	}
	return " --netns " + ns
}

// writeValues lists what the rps and rfs modes set: the global values, then
// each device's queues, in one line per device.
func writeValues(w io.Writer, vs []agent.Value) {
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
