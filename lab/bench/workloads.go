package bench

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/falconnet/falcon/lab/measure"
	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// workloadSizes splits a --workloads entry "tcp:128K" into the workload and
// the sizes it runs at: its own, or --sizes when it names none.
func workloadSizes(entry string, sizes []int) (workload.Kind, []int, error) {
	name, size, pinned := strings.Cut(entry, ":")
	w, ok := workload.Lookup(name)
	if !ok {
		return w, nil, fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(workload.Names(), ", "))
	}
	if pinned {
		n, err := workload.ParseSize(size)
		if err != nil {
			return w, nil, fmt.Errorf("workload %q: %v", entry, err)
		}
		sizes = []int{n}
	}
	for _, n := range sizes {
		if n > w.MaxSize {
			if w.MaxSize == workload.MaxUDPSize {
				return w, nil, fmt.Errorf("workload %s: %d B does not fit a UDP datagram or a sockperf message (at most %d B; use 65507 for \"64K\")", w.Name, n, workload.MaxUDPSize)
			}
			return w, nil, fmt.Errorf("workload %s: %d B is more than %s", w.Name, n, workload.FormatSize(w.MaxSize))
		}
	}
	return w, sizes, nil
}

// TestbedPlan is the cases that share one fresh testbed (one layout ×
// mode, and with ContainersPerFlow one flow count) of Containers per host.
type TestbedPlan struct {
	Layout, Mode string
	Containers   int
	Cases        []measure.Case
}

// Plan expands a config into testbeds and their cases, in the order given
// on the command line. Combinations a mode cannot run are left out and
// explained in skipped.
func Plan(c schema.Config) (plan []TestbedPlan, skipped []string, err error) {
	for _, layout := range c.Layouts {
		if c.IPv6 {
			if err := testbed.CheckIPv6(layout); err != nil {
				return nil, nil, &ConfigError{Msg: err.Error()}
			}
		}
		for _, mode := range c.Modes {
			if why := modes.Unsupported(mode, layout); why != "" {
				skipped = append(skipped, fmt.Sprintf("%s × %s skipped: %s", layout, mode, why))
				continue
			}
			tp := TestbedPlan{Layout: layout, Mode: mode, Containers: c.Containers}
			seen := map[measure.Case]bool{}
			for _, entry := range c.Workloads {
				w, sizes, err := workloadSizes(entry, c.Sizes)
				if err == nil && c.Sender == schema.SenderKernel {
					err = kernelSends(w, sizes)
				}
				if err == nil && c.IPv6 {
					err = overIPv6(w, c.Sender)
				}
				if err != nil {
					return nil, nil, &ConfigError{Msg: err.Error()}
				}
				flows := []int{1}
				if w.Flows {
					flows = c.Flows
				}
				for _, n := range flows {
					if w.MaxFlows > 0 && n > w.MaxFlows {
						return nil, nil, configErrorf("workload %s: --flows %d is more than %d", w.Name, n, w.MaxFlows)
					}
					if workload.IsHotspot(w.Name) && n < 2 {
						return nil, nil, configErrorf("workload %s: --flows %d: a hotspot needs 2 flows or more (flow 0 turns heavy beside the others)", w.Name, n)
					}
				}
				for _, size := range sizes {
					rates, err := caseRates(c, w, size)
					if err != nil {
						return nil, nil, &ConfigError{Msg: err.Error()}
					}
					for _, f := range flows {
						for _, rate := range rates {
							k := measure.Case{Layout: layout, Mode: mode, Workload: w.Name, Size: size, Flows: f, Rate: rate}
							if !seen[k] {
								seen[k] = true
								tp.Cases = append(tp.Cases, k)
							}
						}
					}
				}
			}
			if c.ContainersPerFlow {
				plan = append(plan, byFlows(tp)...)
			} else {
				plan = append(plan, tp)
			}
		}
	}
	if len(plan) == 0 {
		return nil, skipped, configErrorf("nothing to run: %s", strings.Join(skipped, "; "))
	}
	return plan, skipped, nil
}

// overIPv6 checks that workload w can run on an IPv6 testbed: Debian's
// sockperf (3.7) takes IPv4 addresses only (IPv6 came in 3.8), memcaslap
// resolves none ("getaddrinfo(): Name or service not known" for ::1), and
// the kernel sender learns IPv4 frames only. nginx and wrk take IPv6 (web
// ran on an IPv6 docker testbed, every response a 200 of the file).
func overIPv6(w workload.Kind, sender string) error {
	if sender == schema.SenderKernel {
		return errors.New("--ipv6: the kernel sender sends IPv4 frames only (--sender tools)")
	}
	if w.Tool == "sockperf" {
		return fmt.Errorf("--ipv6: workload %s runs sockperf, and Debian's sockperf (3.7) has no IPv6; iperf3's workloads and web run (tcp, udp, multi-flow, multi-flow-tcp, web)", w.Name)
	}
	if w.Client == "memcaslap" {
		return fmt.Errorf("--ipv6: workload %s runs memcaslap, which resolves no IPv6 address; iperf3's workloads and web run (tcp, udp, multi-flow, multi-flow-tcp, web)", w.Name)
	}
	return nil
}

// byFlows splits a testbed's cases by flow count, each onto a testbed with
// as many containers per host as it has flows.
func byFlows(tp TestbedPlan) []TestbedPlan {
	var out []TestbedPlan
	idx := map[int]int{}
	for _, cs := range tp.Cases {
		i, ok := idx[cs.Flows]
		if !ok {
			i = len(out)
			idx[cs.Flows] = i
			out = append(out, TestbedPlan{Layout: tp.Layout, Mode: tp.Mode, Containers: cs.Flows})
		}
		out[i].Cases = append(out[i].Cases, cs)
	}
	return out
}

// CountRuns returns how many runs a plan makes.
func CountRuns(plan []TestbedPlan, c schema.Config) int {
	n := 0
	for _, tp := range plan {
		n += len(tp.Cases) * c.Runs
	}
	return n
}

// tools lists the programs a config needs, sorted.
func tools(c schema.Config) []string {
	set := map[string]bool{}
	for _, entry := range c.Workloads {
		name, _, _ := strings.Cut(entry, ":")
		switch w, ok := workload.Lookup(name); {
		case ok && c.Sender == schema.SenderKernel:
			set["sockperf"] = true // the receiving server
		case ok:
			for _, t := range w.Tools() {
				set[t] = true
			}
		}
	}
	var out []string
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
