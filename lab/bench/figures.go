package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
)

// A figurePreset is the bench of one figure of the four papers' evaluations
// (lab/papers names them, and holds what each says about it): a
// preset named after the figure, built from a topic preset (base) and the
// figure's own values (flags, which win). Where the figure needs something
// falcon does not have yet, needs says what, and the preset refuses to run
// saying so; once it is built, deleting that field (and fixing flags, which
// already hold the intended setup) makes it a runnable preset.
type figurePreset struct {
	name          string // the preset: fig10, mflow4, k8s6, hotcloud3
	paper, figure string // as lab/papers names them: "FALCON", "Fig. 10"
	what          string // what the preset runs, for the help
	base          string // a preset whose values it starts from ("" none)
	flags         map[string]string
	// spread puts the receivers on every CPU the senders do not use, on
	// machines of 4 CPUs or more (FALCON Fig. 14 received on 6 cores).
	spread bool
	// placed gives each role CPUs of its own on machines of ScaleMinCPUs
	// or more (scalePlacement): MFLOW kept application cores apart from
	// the cores that process packets, the kernel-core set.
	placed bool
	// differs is what differs from the paper's setup besides the machine
	// (figureSetups says that).
	differs string
	// lacks is what of the figure it leaves out, not built yet; the
	// preset runs without it.
	lacks string
	// needs is what the figure cannot run without and is not built yet:
	// the preset refuses to run, saying so.
	needs string
	// nothing: the figure is not a measurement (a diagram); the preset
	// refuses to run, saying why.
	nothing string
}

// figureSetups is each paper's testbed, against which the presets run on
// one machine: two network namespaces joined by veth, the sending tools
// on the same CPUs as the receiving host (2 vCPUs on this project's VM).
var figureSetups = map[string]string{
	"FALCON": "FALCON ran two servers with 100 G NICs (and 10 G for some), Linux 4.19/5.4, cores left idle for the stages; " +
		"here one machine, veth between two namespaces, the sender on the receiver's CPUs (2 vCPUs here)",
	"MFLOW": "MFLOW ran two servers with 100 G NICs, Linux 5.7, cores set apart for splitting; " +
		"here one machine, veth between two namespaces, the sender on the receiver's CPUs (2 vCPUs here)",
	"K8s RPS/RFS": "the study ran two 4-core KVM VMs as Kubernetes nodes, Calico VXLAN, 30 s runs; " +
		"here Calico's datapath built with ip on one machine, sender and receiver sharing its CPUs, 5 s runs",
	"HotCloud'19": "HotCloud '19 ran two servers with 40 G NICs, Linux 4.4; " +
		"here one machine, veth between two namespaces, the sender on the receiver's CPUs (2 vCPUs here)",
}

// hotcloudSizes stand for HotCloud '19's "64 B to 8 KB" (the points of its
// plots are not in the text).
const hotcloudSizes = "64,256,1K,4K,8K"

var (
	// kernelCores: MFLOW kept 5 cores for the applications and 10 for
	// packet processing (placed).
	kernelCores = fmt.Sprintf("MFLOW kept 5 application and 10 packet-processing cores; here, on %d CPUs or more, the scale preset's placement "+
		"(senders, the NIC's core, the applications' cores and the packet-processing set falcon steers to, each apart), "+
		"on fewer the roles share the CPUs", ScaleMinCPUs)
)

// figureTable is every figure of the four papers' evaluations (and
// FALCON's two motivation figures), in the papers' order.
var figureTable = []figurePreset{
	{name: "fig2", paper: "FALCON", figure: "Fig. 2",
		what: "the overlay's cost: one sockperf client into one UDP socket at 16 B .. 64 KiB (a, b), one iperf3 TCP flow of 64 KiB writes (a), " +
			"1 and 4 UDP flows of 4 KiB onto the one receiving CPU, flow-to-core 1:1 and 4:1, with and without RPS (c), UDP and TCP ping-pong at 16 B (d); " +
			"host vs docker, vanilla and rps",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla,rps", "workloads": "udp-stress,tcp:64K,multi-flow:4K,latency:16,latency-tcp:16",
			"sizes": paperSizes, "flows": "1,4", "clients": "1"},
		differs: "the paper raised sockperf's rate until drops, here it sends flat out; its TCP was sockperf's, here iperf3; no 10 G comparison"},
	{name: "fig4", paper: "FALCON", figure: "Fig. 4",
		what:    "NET_RX softirqs and rescheduling IPIs (RES) per CPU, recorded in every run: UDP stress at 16 B and 1400 B and one TCP flow, host vs docker, vanilla",
		flags:   map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "udp-stress,tcp:64K", "sizes": "16,1400"},
		differs: "the text gives no workload for this figure"},
	{name: "fig10", paper: "FALCON", figure: "Fig. 10", base: "paper-sizes",
		what: "UDP stress (3 sockperf clients into one server socket) at 16 B .. 64 KiB (65507 B), host vs docker, vanilla and falcon"},
	{name: "fig11", paper: "FALCON", figure: "Fig. 11",
		what:  "per-CPU usr/sys/softirq/irq/idle under UDP stress at 16 B, host vs docker, vanilla and falcon",
		flags: map[string]string{"layouts": "host,docker", "modes": overlayModes(), "workloads": "udp-stress:16"}},
	{name: "fig12", paper: "FALCON", figure: "Fig. 12", base: "latency",
		what: "latency underloaded, UDP ping-pong and sockperf under load at --rate at 16 B (a), TCP under load at --rate at 4 KiB (b), and overloaded, " +
			"UDP and TCP at 16 B each at its highest rate without drops (c, d); host vs docker, vanilla, falcon and falcon+split",
		flags: map[string]string{"modes": "vanilla,falcon,falcon+split",
			"workloads": "latency,latency-load,latency-load-tcp:4K,overload-latency:16,overload-latency-tcp:16"},
		differs: "the paper does not give its fixed rate; here --rate's 10,000 messages/s"},
	{name: "fig13", paper: "FALCON", figure: "Fig. 13", base: "multi-flow",
		what: "1, 2, 4 and 8 flows in one container, UDP 16 B and TCP 4 KiB, host vs docker, vanilla, falcon and falcon+split; " +
			"falcon+split on the host layout is the paper's Host+ (c, d: GRO splitting of the host's own NIC)",
		flags:   map[string]string{"modes": "vanilla,falcon,falcon+split"},
		differs: "the paper had RSS and RPS on and FALCON_CPUS set apart"},
	{name: "fig14", paper: "FALCON", figure: "Fig. 14",
		what: "a busy system: 6, 10, 20 and 40 containers per host, one flow each, UDP 16 B and TCP 4 KiB, docker, vanilla, rps and falcon; " +
			"per-CPU utilisation in every run",
		flags: map[string]string{"layouts": "docker", "modes": "vanilla,rps,falcon", "workloads": "multi-flow:16,multi-flow-tcp:4K",
			"flows": "6,10,20,40", "containers": "flows"},
		spread:  true,
		differs: "the paper received on 6 cores; the text gives no message sizes, here Fig. 13's"},
	{name: "fig15", paper: "FALCON", figure: "Fig. 15",
		what: "throughput against falcon's load threshold, 50 .. 100 %, and always on: UDP stress at 16 B and one TCP flow of 4 KiB writes, docker, " +
			"vanilla, falcon:threshold=N and falcon:always-on=true",
		flags: map[string]string{"layouts": "docker", "workloads": "udp-stress:16,tcp:4K",
			"modes": "vanilla,falcon:threshold=50,falcon:threshold=60,falcon:threshold=70,falcon:threshold=80,falcon:threshold=90,falcon:threshold=100," +
				"falcon:always-on=true"},
		differs: "the text gives neither the workload nor the thresholds plotted"},
	{name: "fig16", paper: "FALCON", figure: "Fig. 16",
		what: "a hotspot: 4 flows at --hotspot-rate, UDP (hotspot) and TCP (hotspot-tcp), one turning flat out half-way, each flow's " +
			"throughput over time, docker, falcon's two-choice balancing (Algorithm 1, policy paper) against the static first choice, " +
			"divided by the static's; the TCP flows' light rate is " +
			"the same --hotspot-rate in full 1448 B segments (20Kpps: 231.68 Mbit/s of 128 KiB writes), about what the UDP flows of 1400 B carry",
		flags: map[string]string{"layouts": "docker", "modes": "falcon:policy=paper,falcon:policy=static", "baseline": "docker/falcon:policy=static",
			"workloads": "hotspot,hotspot-tcp:128K", "flows": "4"},
		differs: "the text gives neither the flows, their rates nor the sizes; here UDP datagrams of 16 B and 1400 B (--sizes), TCP writes of 128 KiB"},
	{name: "fig17", paper: "FALCON", figure: "Fig. 17", base: "web",
		what:    "web serving stood in for: nginx serving a static file of 1 KiB and 64 KiB to wrk --latency over 200 connections, host vs docker, vanilla and falcon",
		differs: "the paper ran CloudSuite's web serving (Elgg on nginx, PHP, MySQL, memcached; 200 users), which cannot be installed here"},
	{name: "fig18", paper: "FALCON", figure: "Fig. 18", base: "memcached",
		what:    "memcached (4 threads), 550 B values, 1 and 10 memcaslap clients of 10 connections each, host vs docker, vanilla and falcon",
		differs: "the paper drove CloudSuite's data caching with the Twitter dataset, here memcaslap's own mix of 9 gets to 1 set"},
	{name: "fig19", paper: "FALCON", figure: "Fig. 19",
		what: "total CPU and NET_RX softirqs of one iperf3 UDP flow of 16 B held to 25, 50, 100, 200 and 400 Kpps (--rates), host vs docker, vanilla and falcon",
		flags: map[string]string{"layouts": "host,docker", "modes": overlayModes(), "workloads": "rates:16",
			"rates": "25Kpps,50Kpps,100Kpps,200Kpps,400Kpps"},
		differs: "the text names 400 Kpps (footnote 5), not the other rates; on 2 vCPUs the highest may be more than the machine takes (the loss says)"},

	{name: "mflow4", paper: "MFLOW", figure: "Fig. 4",
		what: "one flow of 64 KiB: UDP stress at 65507 B and one iperf3 TCP flow of 64 KiB writes, host vs docker, vanilla, rps, falcon and " +
			"falcon+split (the paper's FALCON-fun, GRO on a core of its own)",
		flags:   map[string]string{"layouts": "host,docker", "modes": "vanilla,rps,falcon,falcon+split", "workloads": "udp-stress:65507,tcp:64K"},
		differs: "the paper's TCP was one sockperf pair, here iperf3; the text does not say how many UDP clients, here 3"},
	{name: "mflow7", paper: "MFLOW", figure: "Fig. 7"}, // defined with the presets, in flags.go
	{name: "mflow8", paper: "MFLOW", figure: "Fig. 8"},
	{name: "mflow9", paper: "MFLOW", figure: "Fig. 9",
		what:    "latency of one TCP flow of 64 KiB overloaded (each case at its highest rate without drops), host vs docker, vanilla, rps, falcon and mflow",
		flags:   map[string]string{"layouts": "host,docker", "modes": "vanilla,rps,falcon,mflow", "workloads": "overload-latency-tcp:65507"},
		differs: "64 KiB is 65507 B, sockperf's largest message"},
	{name: "mflow10", paper: "MFLOW", figure: "Fig. 10",
		what: "1, 5, 10 and 20 TCP flows of 16 B, 4 KiB and 64 KiB writes, host vs docker, vanilla, rps, falcon and mflow",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla,rps,falcon,mflow", "workloads": "multi-flow-tcp",
			"sizes": "16,4K,64K", "flows": "1,5,10,20"},
		placed: true, differs: kernelCores},
	{name: "mflow11", paper: "MFLOW", figure: "Fig. 11", base: "web",
		what:    "web serving stood in for: nginx and wrk --latency over 200 connections, files of 1 KiB and 64 KiB, host vs docker, vanilla, falcon and mflow",
		flags:   map[string]string{"modes": "vanilla,falcon,mflow"},
		differs: "the paper ran CloudSuite's web serving (Elgg on nginx, PHP, MySQL, memcached; 200 users), which cannot be installed here"},
	{name: "mflow12", paper: "MFLOW", figure: "Fig. 12",
		what:   "per-CPU utilisation under 5, 10 and 20 TCP flows of 64 KiB writes, docker, vanilla, falcon and mflow",
		flags:  map[string]string{"layouts": "docker", "modes": "vanilla,falcon,mflow", "workloads": "multi-flow-tcp:64K", "flows": "5,10,20"},
		placed: true, differs: kernelCores},
	{name: "mflow13", paper: "MFLOW", figure: "Fig. 13", base: "memcached",
		what:    "memcached (4 threads), 550 B values, 1 and 10 memcaslap clients of 10 connections each, host vs docker, vanilla, falcon and mflow",
		flags:   map[string]string{"modes": "vanilla,falcon,mflow"},
		differs: "the paper drove CloudSuite's data caching with the Twitter dataset, here memcaslap's own mix of 9 gets to 1 set"},

	{name: "k8s3", paper: "K8s RPS/RFS", figure: "Fig. 3",
		nothing: "is the study's setup drawn as a diagram: nothing to measure; k8s4, k8s5 and k8s6 run that setup"},
	{name: "k8s4", paper: "K8s RPS/RFS", figure: "Fig. 4", base: "k8s-rps-rfs",
		what:  "idle CPU per core under 1 and 16 replicas (iperf3 TCP pairs of 128 KiB writes, a container each) on calico, baseline, RPS, RPS+, RFS, RFS+ and falcon",
		flags: map[string]string{"flows": "1,16"}},
	{name: "k8s5", paper: "K8s RPS/RFS", figure: "Fig. 5", base: "k8s-rps-rfs",
		what:  "softirq time per core under 1 and 16 replicas (iperf3 TCP pairs of 128 KiB writes, a container each) on calico, baseline, RPS, RPS+, RFS, RFS+ and falcon",
		flags: map[string]string{"flows": "1,16"}},
	{name: "k8s6", paper: "K8s RPS/RFS", figure: "Fig. 6", base: "k8s-rps-rfs",
		what: "bit rate normalised to the baseline, 1 .. 16 replicas (iperf3 TCP pairs of 128 KiB writes, a container each) on calico, baseline, RPS, RPS+, RFS, RFS+ and falcon"},

	{name: "hotcloud2", paper: "HotCloud'19", figure: "Fig. 2",
		what:    "where the TCP receive path spends its time: one iperf3 TCP flow of 128 KiB writes, host vs docker, vanilla, with each receive stage's NET_RX time per CPU (--stage-cost)",
		flags:   map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "tcp:128K", "stage-cost": "true"},
		differs: "the paper drew the kernel's function call graph; here the time of each stage (nic, vxlan, container, backlog)"},
	{name: "hotcloud3", paper: "HotCloud'19", figure: "Fig. 3",
		what: "TCP throughput of 1, 2, 6, 16, 32 and 80 iperf3 pairs of 128 KiB writes, a container each, host vs the Linux overlay (vxlan) vs docker, vanilla",
		flags: map[string]string{"layouts": "host,vxlan,docker", "modes": "vanilla", "workloads": "multi-flow-tcp:128K",
			"flows": "1,2,6,16,32,80", "containers": "flows"}},
	{name: "hotcloud4", paper: "HotCloud'19", figure: "Fig. 4",
		what:  "the receiver's CPU usage by kind under 1 and 80 iperf3 TCP pairs of 128 KiB writes, a container each, host vs docker, vanilla",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "multi-flow-tcp:128K", "flows": "1,80", "containers": "flows"}},
	{name: "hotcloud5", paper: "HotCloud'19", figure: "Fig. 5",
		what: "UDP throughput of 1, 2, 4, 7, 16, 32 and 80 iperf3 pairs of 8 KiB datagrams, a container each, host vs the Linux overlay (vxlan) vs docker, vanilla",
		flags: map[string]string{"layouts": "host,vxlan,docker", "modes": "vanilla", "workloads": "multi-flow:8K",
			"flows": "1,2,4,7,16,32,80", "containers": "flows"}},
	{name: "hotcloud6", paper: "HotCloud'19", figure: "Fig. 6",
		what:  "the receiver's CPU usage by kind under one iperf3 UDP flow of 8 KiB datagrams, host vs docker, vanilla",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "udp:8K"}},
	{name: "hotcloud7", paper: "HotCloud'19", figure: "Fig. 7",
		what:  "TCP packet rate of one iperf3 flow at 64 B .. 8 KiB writes, host vs docker, vanilla",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "tcp", "sizes": hotcloudSizes}},
	{name: "hotcloud8", paper: "HotCloud'19", figure: "Fig. 8",
		what:  "the receiver's CPU usage by kind under one iperf3 TCP flow of 64 B .. 8 KiB writes, host vs docker, vanilla",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "tcp", "sizes": hotcloudSizes}},
	{name: "hotcloud9", paper: "HotCloud'19", figure: "Fig. 9",
		what:  "UDP packet rate of one iperf3 flow at 64 B .. 8 KiB datagrams, host vs docker, vanilla",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "udp", "sizes": hotcloudSizes}},
	{name: "hotcloud10", paper: "HotCloud'19", figure: "Fig. 10",
		what:  "the receiver's CPU usage under one iperf3 UDP flow of 64 B .. 8 KiB datagrams, host vs docker, vanilla",
		flags: map[string]string{"layouts": "host,docker", "modes": "vanilla", "workloads": "udp", "sizes": hotcloudSizes}},
	{name: "hotcloud11", paper: "HotCloud'19", figure: "Fig. 11",
		what:  "IRQs and NET_RX softirqs per CPU under one iperf3 UDP flow of 64 B .. 8 KiB datagrams, docker, vanilla",
		flags: map[string]string{"layouts": "docker", "modes": "vanilla", "workloads": "udp", "sizes": hotcloudSizes}},
}

// PaperAll is the preset that runs every figure preset in turn.
const PaperAll = "paper-all"

func init() {
	for i := range figureTable {
		r := &figureTable[i]
		if _, defined := presets[r.name]; defined || r.refusal() != "" {
			continue // defined with the topic presets (mflow7, mflow8), or not runnable
		}
		presets[r.name] = preset{summary: r.summary(), flags: r.presetFlags}
	}
}

func lookupFigure(name string) (*figurePreset, bool) {
	for i := range figureTable {
		if figureTable[i].name == name {
			return &figureTable[i], true
		}
	}
	return nil, false
}

// FigureOf names the paper and figure of a figure's preset ("fig10":
// "FALCON", "Fig. 10"), as lab/papers does; ok is false for other
// presets.
func FigureOf(preset string) (paper, figure string, ok bool) {
	r, ok := lookupFigure(preset)
	if !ok {
		return "", "", false
	}
	return r.paper, r.figure, true
}

// title is "FALCON Fig. 10".
func (r *figurePreset) title() string { return r.paper + " " + r.figure }

// refusal is why the preset does not run, "" when it does.
func (r *figurePreset) refusal() string {
	switch {
	case r.needs != "":
		return fmt.Sprintf("%s needs %s, not built yet", r.title(), r.needs)
	case r.nothing != "":
		return fmt.Sprintf("%s %s", r.title(), r.nothing)
	}
	return ""
}

// summary is the preset's help: the figure, what runs, what is left out
// and what differs from the paper's setup.
func (r *figurePreset) summary() string {
	if why := r.refusal(); why != "" {
		if r.what == "" {
			return "(does not run) " + why
		}
		return fmt.Sprintf("(does not run) %s: %s", why, r.what)
	}
	if p, ok := presets[r.name]; ok && r.what == "" {
		return p.summary // defined with the topic presets
	}
	s := r.title() + ": " + r.what
	if r.lacks != "" {
		s += ". Left out, not built yet: " + r.lacks
	}
	s += ". Differs from the paper: " + figureSetups[r.paper]
	if r.differs != "" {
		s += "; " + r.differs
	}
	return s
}

// presetFlags is the base preset's values under the figure's own.
func (r *figurePreset) presetFlags(online []int) (map[string]string, error) {
	m := map[string]string{}
	if r.base != "" {
		b, err := presets[r.base].flags(online)
		if err != nil {
			return nil, err
		}
		for k, v := range b {
			m[k] = v
		}
	}
	for k, v := range r.flags {
		m[k] = v
	}
	if r.spread && len(online) >= 4 {
		m["receiver-cpus"] = cpuset.Format(spareCPUs(online))
	}
	if r.placed && len(online) >= ScaleMinCPUs {
		p, err := scalePlacement(online)
		if err != nil {
			return nil, err
		}
		flagValues(m).with(placementFlags(p))
	}
	return m, nil
}

// spareCPUs are the online CPUs the default senders do not use.
func spareCPUs(online []int) []int {
	senders := defaultCPUs(online).sender
	var rest []int
	for _, c := range online {
		if !containsInt(senders, c) {
			rest = append(rest, c)
		}
	}
	return rest
}

// figureHelp lists paper-all and the figures' presets in the papers'
// order, those that do not run with the reason.
func figureHelp() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n  %-12s every figure preset below in turn, one results file each (PRESET.json) into the directory --json names; "+
		"a figure that cannot run gets a file saying why; flags given apply to every figure (e.g. --quick)\n", PaperAll)
	b.WriteString("\n  the papers' figures (lab/papers quotes what each paper says of them):\n")
	for i := range figureTable {
		r := &figureTable[i]
		fmt.Fprintf(&b, "  %-12s %s\n", r.name, r.summary())
	}
	return b.String()
}

// checkRunnable refuses paper-all (which is not one bench) and the
// figures' presets that do not run.
func checkRunnable(preset string) error {
	if preset == PaperAll {
		return configErrorf("--preset %s runs one bench per figure: falcon-lab bench --preset %s --json DIR", PaperAll, PaperAll)
	}
	if r, ok := lookupFigure(preset); ok {
		if why := r.refusal(); why != "" {
			return configErrorf("--preset %s: %s", preset, why)
		}
	}
	return nil
}

// --quick: one short run per case, for smoke tests.
var quickFlags = map[string]string{"runs": "1", "duration": "1s", "warmup": "500ms"}

// quickDefaults sets quickFlags' values where the command line gave
// none, over a preset's.
func (f *Flags) quickDefaults(given map[string]bool) error {
	for name, v := range quickFlags {
		if !given[name] {
			if err := f.fs.Set(name, v); err != nil {
				return fmt.Errorf("--quick: flag %s=%s: %v", name, v, err)
			}
		}
	}
	return nil
}

// quickCut keeps a sweep of more than three values to its smallest,
// middle and largest, ascending.
func quickCut(list []int) []int {
	if len(list) <= 3 {
		return list
	}
	return quickCutOrdered(slices.Sorted(slices.Values(list)))
}

// quickCutOrdered keeps a sweep of more than three values to its first,
// middle and last, as given (--rates: a list of rates in its own units).
func quickCutOrdered[T any](list []T) []T {
	if len(list) <= 3 {
		return list
	}
	return []T{list[0], list[len(list)/2], list[len(list)-1]}
}
