package workload

import (
	"fmt"
	"slices"
	"strings"
)

// Kind describes one traffic pattern bench can drive.
type Kind struct {
	Name    string
	Summary string
	Tool    string // the client/server tool it needs
	MaxSize int    // datagrams and sockperf messages stop at MaxUDPSize
	Flows   bool   // the --flows dimension applies
	// maxFlows bounds --flows where they count one tool's connections or
	// threads (0: only the testbed bounds them).
	MaxFlows int
	Latency  bool   // reports latency percentiles
	Rate     bool   // sockperf under-load at --rate
	Kernel   bool   // the kernel sender can drive it (--sender kernel)
	Client   string // the client tool, where it is not tool (the server)
	// Headline overrides the metric JudgedBy infers from the others.
	Headline string
}

var kinds = []Kind{
	{Name: "udp-stress", Summary: "K sockperf throughput clients (--clients) into one UDP server socket", Tool: "sockperf", MaxSize: MaxUDPSize, Kernel: true},
	{Name: "udp", Summary: "one iperf3 UDP flow at full speed", Tool: "iperf3", MaxSize: MaxUDPSize, Kernel: true},
	{Name: "tcp", Summary: "one iperf3 TCP flow", Tool: "iperf3", MaxSize: MaxSize},
	{Name: "multi-flow", Summary: "N iperf3 UDP flows (--flows), one client and one server each", Tool: "iperf3", MaxSize: MaxUDPSize, Flows: true, Kernel: true},
	{Name: "multi-flow-tcp", Summary: "N iperf3 TCP flows (--flows), one client and one server each", Tool: "iperf3", MaxSize: MaxSize, Flows: true},
	{Name: "latency", Summary: "sockperf UDP ping-pong", Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true},
	{Name: "latency-tcp", Summary: "sockperf TCP ping-pong", Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true},
	{Name: "latency-load", Summary: "sockperf UDP under-load at a fixed --rate", Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, Rate: true},
	{Name: "latency-load-tcp", Summary: "sockperf TCP under-load at a fixed --rate: modes compared at one load, where overload-latency-tcp measures each at its own highest",
		Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, Rate: true},
	{Name: "memcached", Summary: "memcaslap (9 gets to 1 set, values of the size) against memcached; --flows clients of 10 connections each",
		// memcached's items stop at 1 MiB, key and header included.
		// memcaslap opens 1024 connections at most.
		Tool: "memcached", Client: "memcaslap", MaxSize: 512 << 10, Flows: true, MaxFlows: 1024 / MemcachedConns, Headline: "pps"},
	{Name: "web", Summary: "wrk --latency against nginx serving one static file of the size (standing in for CloudSuite's web serving); --flows connections",
		Tool: "nginx", Client: "wrk", MaxSize: MaxSize, Flows: true, MaxFlows: MaxWrkConnections, Headline: "pps"},
	{Name: "overload-latency", Summary: "the highest sockperf UDP rate without drops (a search of short steps), then sockperf under-load there: " +
		"latency when overloaded (FALCON Fig. 12 c)", Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true},
	{Name: "overload-latency-tcp", Summary: "as overload-latency over TCP: the highest rate sockperf reaches with no retransmissions, then the latency there (FALCON Fig. 12 d)",
		Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true},
	{Name: "rates", Summary: "one iperf3 UDP flow held to each --rates rate (-b): delivered rate, loss, CPU usr/sys/softirq/irq per CPU and in total (FALCON Fig. 19)",
		Tool: "iperf3", MaxSize: MaxUDPSize, Headline: "cpu_total_busy"},
	{Name: "rates-tcp", Summary: "one iperf3 TCP flow held to each --rates rate, as rates", Tool: "iperf3", MaxSize: MaxSize, Headline: "cpu_total_busy"},
	{Name: "hotspot", Summary: "--flows iperf3 UDP flows at --hotspot-rate, flow 0 turning flat out half-way on the same 5-tuple; " +
		"each flow's received rate every 0.1 s (FALCON Fig. 16)", Tool: "iperf3", MaxSize: MaxUDPSize, Flows: true},
	{Name: "hotspot-tcp", Summary: "as hotspot over TCP (Fig. 16's TCP panel): --flows iperf3 TCP flows of writes of the size at --hotspot-rate " +
		"(a packet rate counts full 1448 B segments: 20Kpps is 231.68M), flow 0 turning flat out half-way on the same 5-tuple; " +
		"each flow's received Gbit/s every 0.1 s", Tool: "iperf3", MaxSize: MaxSize, Flows: true},
}

// All lists the workloads, in the order of the usage text.
func All() []Kind { return slices.Clone(kinds) }

// Lookup finds a workload by its name.
func Lookup(name string) (Kind, bool) {
	for _, w := range kinds {
		if w.Name == name {
			return w, true
		}
	}
	return Kind{}, false
}

// AtRate says whether a workload runs at --rate.
func AtRate(name string) bool {
	w, _ := Lookup(name)
	return w.Rate
}

func Names() []string {
	var n []string
	for _, w := range kinds {
		n = append(n, w.Name)
	}
	return n
}

// Help lists the workloads for the command's usage text.
func Help() string {
	var b strings.Builder
	for _, w := range kinds {
		fmt.Fprintf(&b, "  %-15s %s\n", w.Name, w.Summary)
	}
	return b.String()
}

// IsTCP says whether a workload's traffic is TCP.
func IsTCP(name string) bool {
	switch name {
	case "tcp", "multi-flow-tcp", "latency-tcp", "latency-load-tcp", "memcached", "web", "rates-tcp", "overload-latency-tcp", "hotspot-tcp":
		return true
	}
	return false
}

// MemcachedConns is the connections of one memcached Client: FALCON's
// Fig. 18 ran up to 10 clients over 100 connections.
const MemcachedConns = 10

// IsRates says whether a workload runs at the --rates rates.
func IsRates(name string) bool { return name == "rates" || name == "rates-tcp" }

// IsHotspot says whether a workload is a hotspot (FALCON Fig. 16),
// over UDP or TCP.
func IsHotspot(name string) bool { return name == "hotspot" || name == "hotspot-tcp" }

// JudgedBy is the metric a workload is judged by, and so the one the
// "vs baseline" column and the chart show: packets/s for UDP, the bit rate
// for TCP (as the Kubernetes RPS/RFS study normalises; TCP segments/s
// depend on how much GRO merged), p99 latency for the latency workloads;
// memcached is judged by its operations/s.
func JudgedBy(name string) string {
	w, _ := Lookup(name)
	switch {
	case w.Headline != "":
		return w.Headline
	case w.Latency:
		return "lat_p99_us"
	case w.MaxSize == MaxSize: // TCP throughput
		return "gbps"
	}
	return "pps"
}
