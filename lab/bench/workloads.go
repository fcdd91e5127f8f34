package bench

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// workloadKind describes one traffic pattern bench can drive.
type workloadKind struct {
	name    string
	summary string
	tool    string // the client/server tool it needs
	maxSize int    // datagrams and sockperf messages stop at MaxUDPSize
	flows   bool   // the --flows dimension applies
	// maxFlows bounds --flows where they count one tool's connections or
	// threads (0: only the testbed bounds them).
	maxFlows int
	latency  bool   // reports latency percentiles
	rate     bool   // sockperf under-load at --rate
	kernel   bool   // the kernel sender can drive it (--sender kernel)
	client   string // the client tool, where it is not tool (the server)
	// headline overrides the metric headline() infers from the others.
	headline string
}

var workloadKinds = []workloadKind{
	{name: "udp-stress", summary: "K sockperf throughput clients (--clients) into one UDP server socket", tool: "sockperf", maxSize: MaxUDPSize, kernel: true},
	{name: "udp", summary: "one iperf3 UDP flow at full speed", tool: "iperf3", maxSize: MaxUDPSize, kernel: true},
	{name: "tcp", summary: "one iperf3 TCP flow", tool: "iperf3", maxSize: MaxSize},
	{name: "multi-flow", summary: "N iperf3 UDP flows (--flows), one client and one server each", tool: "iperf3", maxSize: MaxUDPSize, flows: true, kernel: true},
	{name: "multi-flow-tcp", summary: "N iperf3 TCP flows (--flows), one client and one server each", tool: "iperf3", maxSize: MaxSize, flows: true},
	{name: "latency", summary: "sockperf UDP ping-pong", tool: "sockperf", maxSize: MaxUDPSize, latency: true},
	{name: "latency-tcp", summary: "sockperf TCP ping-pong", tool: "sockperf", maxSize: MaxUDPSize, latency: true},
	{name: "latency-load", summary: "sockperf UDP under-load at a fixed --rate", tool: "sockperf", maxSize: MaxUDPSize, latency: true, rate: true},
	{name: "latency-load-tcp", summary: "sockperf TCP under-load at a fixed --rate: modes compared at one load, where overload-latency-tcp measures each at its own highest",
		tool: "sockperf", maxSize: MaxUDPSize, latency: true, rate: true},
	{name: "memcached", summary: "memcaslap (9 gets to 1 set, values of the size) against memcached; --flows clients of 10 connections each",
		// memcached's items stop at 1 MiB, key and header included.
		// memcaslap opens 1024 connections at most.
		tool: "memcached", client: "memcaslap", maxSize: 512 << 10, flows: true, maxFlows: 1024 / memcachedConns, headline: "pps"},
	{name: "web", summary: "wrk --latency against nginx serving one static file of the size (standing in for CloudSuite's web serving); --flows connections",
		tool: "nginx", client: "wrk", maxSize: MaxSize, flows: true, maxFlows: workload.MaxWrkConnections, headline: "pps"},
	{name: "overload-latency", summary: "the highest sockperf UDP rate without drops (a search of short steps), then sockperf under-load there: " +
		"latency when overloaded (FALCON Fig. 12 c)", tool: "sockperf", maxSize: MaxUDPSize, latency: true},
	{name: "overload-latency-tcp", summary: "as overload-latency over TCP: the highest rate sockperf reaches with no retransmissions, then the latency there (FALCON Fig. 12 d)",
		tool: "sockperf", maxSize: MaxUDPSize, latency: true},
	{name: "rates", summary: "one iperf3 UDP flow held to each --rates rate (-b): delivered rate, loss, CPU usr/sys/softirq/irq per CPU and in total (FALCON Fig. 19)",
		tool: "iperf3", maxSize: MaxUDPSize, headline: "cpu_total_busy"},
	{name: "rates-tcp", summary: "one iperf3 TCP flow held to each --rates rate, as rates", tool: "iperf3", maxSize: MaxSize, headline: "cpu_total_busy"},
	{name: "hotspot", summary: "--flows iperf3 UDP flows at --hotspot-rate, flow 0 turning flat out half-way on the same 5-tuple; " +
		"each flow's received rate every 0.1 s (FALCON Fig. 16)", tool: "iperf3", maxSize: MaxUDPSize, flows: true},
	{name: "hotspot-tcp", summary: "as hotspot over TCP (Fig. 16's TCP panel): --flows iperf3 TCP flows of writes of the size at --hotspot-rate " +
		"(a packet rate counts full 1448 B segments: 20Kpps is 231.68M), flow 0 turning flat out half-way on the same 5-tuple; " +
		"each flow's received Gbit/s every 0.1 s", tool: "iperf3", maxSize: MaxSize, flows: true},
}

func lookupWorkload(name string) (workloadKind, bool) {
	for _, w := range workloadKinds {
		if w.name == name {
			return w, true
		}
	}
	return workloadKind{}, false
}

// atRate says whether a workload runs at --rate.
func atRate(name string) bool {
	w, _ := lookupWorkload(name)
	return w.rate
}

func workloadNames() []string {
	var n []string
	for _, w := range workloadKinds {
		n = append(n, w.name)
	}
	return n
}

// WorkloadHelp lists the workloads for the command's usage text.
func WorkloadHelp() string {
	var b strings.Builder
	for _, w := range workloadKinds {
		fmt.Fprintf(&b, "  %-15s %s\n", w.name, w.summary)
	}
	return b.String()
}

// workloadSizes splits a --workloads entry "tcp:128K" into the workload and
// the sizes it runs at: its own, or --sizes when it names none.
func workloadSizes(entry string, sizes []int) (workloadKind, []int, error) {
	name, size, pinned := strings.Cut(entry, ":")
	w, ok := lookupWorkload(name)
	if !ok {
		return w, nil, fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(workloadNames(), ", "))
	}
	if pinned {
		n, err := ParseSize(size)
		if err != nil {
			return w, nil, fmt.Errorf("workload %q: %v", entry, err)
		}
		sizes = []int{n}
	}
	for _, n := range sizes {
		if n > w.maxSize {
			if w.maxSize == MaxUDPSize {
				return w, nil, fmt.Errorf("workload %s: %d B does not fit a UDP datagram or a sockperf message (at most %d B; use 65507 for \"64K\")", w.name, n, MaxUDPSize)
			}
			return w, nil, fmt.Errorf("workload %s: %d B is more than %s", w.name, n, FormatSize(w.maxSize))
		}
	}
	return w, sizes, nil
}

// Case is one cell of the matrix: what runs --runs times on one testbed.
type Case struct {
	Layout, Mode, Workload string
	Size, Flows            int
	Rate                   string // the rates workloads' rate (a --rates entry)
}

func (c Case) String() string {
	s := fmt.Sprintf("%s/%s %s %s", c.Layout, c.Mode, c.Workload, FormatSize(c.Size))
	if c.Flows > 1 {
		s += fmt.Sprintf(" ×%d", c.Flows)
	}
	if c.Rate != "" {
		s += " at " + c.Rate
	}
	return s
}

// TestbedPlan is the cases that share one fresh testbed (one layout ×
// mode, and with ContainersPerFlow one flow count) of Containers per host.
type TestbedPlan struct {
	Layout, Mode string
	Containers   int
	Cases        []Case
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
			if why := unsupported(mode, layout); why != "" {
				skipped = append(skipped, fmt.Sprintf("%s × %s skipped: %s", layout, mode, why))
				continue
			}
			tp := TestbedPlan{Layout: layout, Mode: mode, Containers: c.Containers}
			seen := map[Case]bool{}
			for _, entry := range c.Workloads {
				w, sizes, err := workloadSizes(entry, c.Sizes)
				if err == nil && c.Sender == SenderKernel {
					err = kernelSends(w, sizes)
				}
				if err == nil && c.IPv6 {
					err = overIPv6(w, c.Sender)
				}
				if err != nil {
					return nil, nil, &ConfigError{Msg: err.Error()}
				}
				flows := []int{1}
				if w.flows {
					flows = c.Flows
				}
				for _, n := range flows {
					if w.maxFlows > 0 && n > w.maxFlows {
						return nil, nil, configErrorf("workload %s: --flows %d is more than %d", w.name, n, w.maxFlows)
					}
					if hotspotWorkload(w.name) && n < 2 {
						return nil, nil, configErrorf("workload %s: --flows %d: a hotspot needs 2 flows or more (flow 0 turns heavy beside the others)", w.name, n)
					}
				}
				for _, size := range sizes {
					rates, err := caseRates(c, w, size)
					if err != nil {
						return nil, nil, &ConfigError{Msg: err.Error()}
					}
					for _, f := range flows {
						for _, rate := range rates {
							k := Case{layout, mode, w.name, size, f, rate}
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
func overIPv6(w workloadKind, sender string) error {
	if sender == SenderKernel {
		return errors.New("--ipv6: the kernel sender sends IPv4 frames only (--sender tools)")
	}
	if w.tool == "sockperf" {
		return fmt.Errorf("--ipv6: workload %s runs sockperf, and Debian's sockperf (3.7) has no IPv6; iperf3's workloads and web run (tcp, udp, multi-flow, multi-flow-tcp, web)", w.name)
	}
	if w.client == "memcaslap" {
		return fmt.Errorf("--ipv6: workload %s runs memcaslap, which resolves no IPv6 address; iperf3's workloads and web run (tcp, udp, multi-flow, multi-flow-tcp, web)", w.name)
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
		switch w, ok := lookupWorkload(name); {
		case ok && c.Sender == SenderKernel:
			set["sockperf"] = true // the receiving server
		case ok:
			set[w.tool] = true
			if w.client != "" {
				set[w.client] = true
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
