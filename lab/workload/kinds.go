package workload

import (
	"fmt"
	"slices"
	"strings"
)

// Kind describes one traffic pattern bench can drive: everything the
// bench, its drivers (lab/measure) and the report (lab/render) ask of a
// workload is a field here, so adding a workload is an entry in kinds,
// plus a driver in lab/measure where none of the existing ones runs it.
type Kind struct {
	Name    string
	Summary string
	Driver  Driver // the code in lab/measure that runs it
	TCP     bool   // its traffic is TCP (else UDP)
	Pairs   Pairs  // how many client -> server pairs a run has
	Tool    string // the client/server tool it needs
	Client  string // the client tool, where it is not tool (the server)
	MaxSize int    // datagrams and sockperf messages stop at MaxUDPSize
	Flows   bool   // the --flows dimension applies
	// FlowsAre is what --flows counts, on a chart's axis ("" for flows).
	FlowsAre string
	// maxFlows bounds --flows where they count one tool's connections or
	// threads (0: only the testbed bounds them).
	MaxFlows int
	Latency  bool // judged by its latency percentiles
	// LatencyIs says what the latency percentiles it reports measure
	// ("": it reports none).
	LatencyIs string
	Rate      bool // sockperf under-load at --rate
	Kernel    bool // the kernel sender can drive it (--sender kernel)
	// Headline overrides the metric JudgedBy infers from the others.
	Headline string
}

// Driver names the code in lab/measure that runs a workload.
type Driver string

// The drivers, each shared by the workloads whose entries name it.
const (
	DriverStress   Driver = "sockperf-stress" // K sockperf throughput clients
	DriverIperf3   Driver = "iperf3"          // iperf3 flows at full speed
	DriverLatency  Driver = "sockperf-latency"
	DriverMemcache Driver = "memcaslap"
	DriverWeb      Driver = "wrk"
	DriverOverload Driver = "overload-search" // the highest rate without drops, then latency there
	DriverRates    Driver = "iperf3-rates"    // one flow at each --rates rate
	DriverHotspot  Driver = "iperf3-hotspot"  // flows at a light rate, one turning flat out
)

// Pairs says how many client -> server pairs a run of a workload has.
type Pairs int

const (
	OnePair      Pairs = iota // one client, one server (a multi-threaded client counts once)
	PairPerFlow               // --flows pairs, flow i from the i-th client to the i-th server
	ClientsToOne              // --clients clients into one server
)

// sockperfLatency is what sockperf's latency percentiles are.
const sockperfLatency = "sockperf's one-way latency (half the round trip)"

var kinds = []Kind{
	{Name: "udp-stress", Summary: "K sockperf throughput clients (--clients) into one UDP server socket",
		Driver: DriverStress, Pairs: ClientsToOne, Tool: "sockperf", MaxSize: MaxUDPSize, Kernel: true},
	{Name: "udp", Summary: "one iperf3 UDP flow at full speed", Driver: DriverIperf3, Tool: "iperf3", MaxSize: MaxUDPSize, Kernel: true},
	{Name: "tcp", Summary: "one iperf3 TCP flow", Driver: DriverIperf3, TCP: true, Tool: "iperf3", MaxSize: MaxSize},
	{Name: "multi-flow", Summary: "N iperf3 UDP flows (--flows), one client and one server each",
		Driver: DriverIperf3, Pairs: PairPerFlow, Tool: "iperf3", MaxSize: MaxUDPSize, Flows: true, Kernel: true},
	{Name: "multi-flow-tcp", Summary: "N iperf3 TCP flows (--flows), one client and one server each",
		Driver: DriverIperf3, TCP: true, Pairs: PairPerFlow, Tool: "iperf3", MaxSize: MaxSize, Flows: true},
	{Name: "latency", Summary: "sockperf UDP ping-pong",
		Driver: DriverLatency, Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, LatencyIs: sockperfLatency},
	{Name: "latency-tcp", Summary: "sockperf TCP ping-pong",
		Driver: DriverLatency, TCP: true, Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, LatencyIs: sockperfLatency},
	{Name: "latency-load", Summary: "sockperf UDP under-load at a fixed --rate",
		Driver: DriverLatency, Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, LatencyIs: sockperfLatency, Rate: true},
	{Name: "latency-load-tcp", Summary: "sockperf TCP under-load at a fixed --rate: modes compared at one load, where overload-latency-tcp measures each at its own highest",
		Driver: DriverLatency, TCP: true, Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, LatencyIs: sockperfLatency, Rate: true},
	{Name: "memcached", Summary: "memcaslap (9 gets to 1 set, values of the size) against memcached; --flows clients of 10 connections each",
		// memcached's items stop at 1 MiB, key and header included.
		// memcaslap opens 1024 connections at most.
		Driver: DriverMemcache, TCP: true, Tool: "memcached", Client: "memcaslap", MaxSize: 512 << 10,
		Flows: true, FlowsAre: fmt.Sprintf("clients (%d connections each)", MemcachedConns), MaxFlows: 1024 / MemcachedConns,
		LatencyIs: "each operation's round trip (memcaslap; interpolated in its power-of-two buckets)", Headline: "pps"},
	{Name: "web", Summary: "wrk --latency against nginx serving one static file of the size (standing in for CloudSuite's web serving); --flows connections",
		Driver: DriverWeb, TCP: true, Tool: "nginx", Client: "wrk", MaxSize: MaxSize, Flows: true, FlowsAre: "connections", MaxFlows: MaxWrkConnections,
		LatencyIs: "each request's round trip (wrk)", Headline: "pps"},
	{Name: "overload-latency", Summary: "the highest sockperf UDP rate without drops (a search of short steps), then sockperf under-load there: " +
		"latency when overloaded (FALCON Fig. 12 c)", Driver: DriverOverload, Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, LatencyIs: sockperfLatency},
	{Name: "overload-latency-tcp", Summary: "as overload-latency over TCP: the highest rate sockperf reaches with no retransmissions, then the latency there (FALCON Fig. 12 d)",
		Driver: DriverOverload, TCP: true, Tool: "sockperf", MaxSize: MaxUDPSize, Latency: true, LatencyIs: sockperfLatency},
	{Name: "rates", Summary: "one iperf3 UDP flow held to each --rates rate (-b): delivered rate, loss, CPU usr/sys/softirq/irq per CPU and in total (FALCON Fig. 19)",
		Driver: DriverRates, Tool: "iperf3", MaxSize: MaxUDPSize, Headline: "cpu_total_busy"},
	{Name: "rates-tcp", Summary: "one iperf3 TCP flow held to each --rates rate, as rates",
		Driver: DriverRates, TCP: true, Tool: "iperf3", MaxSize: MaxSize, Headline: "cpu_total_busy"},
	{Name: "hotspot", Summary: "--flows iperf3 UDP flows at --hotspot-rate, flow 0 turning flat out half-way on the same 5-tuple; " +
		"each flow's received rate every 0.1 s (FALCON Fig. 16)", Driver: DriverHotspot, Pairs: PairPerFlow, Tool: "iperf3", MaxSize: MaxUDPSize, Flows: true},
	{Name: "hotspot-tcp", Summary: "as hotspot over TCP (Fig. 16's TCP panel): --flows iperf3 TCP flows of writes of the size at --hotspot-rate " +
		"(a packet rate counts full 1448 B segments: 20Kpps is 231.68M), flow 0 turning flat out half-way on the same 5-tuple; " +
		"each flow's received Gbit/s every 0.1 s", Driver: DriverHotspot, TCP: true, Pairs: PairPerFlow, Tool: "iperf3", MaxSize: MaxSize, Flows: true},
}

// Tools lists what a run of the workload starts: its server's tool and its
// client's, where that is another.
func (w Kind) Tools() []string {
	if w.Client == "" || w.Client == w.Tool {
		return []string{w.Tool}
	}
	return []string{w.Tool, w.Client}
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
	w, _ := Lookup(name)
	return w.TCP
}

// MemcachedConns is the connections of one memcached Client: FALCON's
// Fig. 18 ran up to 10 clients over 100 connections.
const MemcachedConns = 10

// IsRates says whether a workload runs at the --rates rates.
func IsRates(name string) bool {
	w, _ := Lookup(name)
	return w.Driver == DriverRates
}

// IsHotspot says whether a workload is a hotspot (FALCON Fig. 16),
// over UDP or TCP.
func IsHotspot(name string) bool {
	w, _ := Lookup(name)
	return w.Driver == DriverHotspot
}

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
	case w.TCP:
		return "gbps"
	}
	return "pps"
}
