package bench

import (
	"fmt"
	"sort"
	"strings"
)

// The named presets of --preset: what each compares, as flag values.

// A preset is a set of flag values; flags given on the command line win.
// flags gets the online CPUs, for presets that place roles on them, and may
// refuse a machine (a *ConfigError, before anything is touched).
type preset struct {
	summary string
	flags   func(online []int) (map[string]string, error)
}

// fixed is a preset that does not depend on the machine.
func fixed(m map[string]string) func([]int) (map[string]string, error) {
	return func([]int) (map[string]string, error) { return m, nil }
}

// overlayModes are what the presets compare: host, the vanilla overlay
// and Falcon.
func overlayModes() string { return "vanilla,falcon" }

var presets = map[string]preset{
	"demo": {"host vs docker overlay, vanilla, fastpath and falcon's default: UDP stress at 16 B, one TCP flow, TCP ping-pong; " +
		"3 interleaved rounds of 2 s, about 4 minutes on 2 CPUs", fixed(
		map[string]string{"layouts": "host,docker", "modes": "vanilla,fastpath,auto",
			"workloads": "udp-stress:16,tcp:128K,latency-tcp:16", "duration": "2s", "runs": "3", "interleave": "true", "max-steal": stealBar})},
	"quick": {"a smoke test of about a minute: docker overlay, vanilla vs falcon, UDP stress 1400 B, TCP, UDP ping-pong; 1 run of 2 s each", fixed(
		map[string]string{"layouts": "docker", "modes": overlayModes(),
			"workloads": "udp-stress:1400,tcp:128K,latency:16", "duration": "2s", "runs": "1"})},
	"paper-sizes": {"FALCON Fig. 10: UDP stress over 16 B .. 64 KiB, host vs docker (vs falcon)", fixed(
		map[string]string{"layouts": "host,docker", "modes": overlayModes(), "workloads": "udp-stress",
			"sizes": paperSizes})},
	"latency": {"FALCON Fig. 12: UDP latency ping-pong and under load at 16 B, TCP ping-pong at 4 KiB", fixed(
		map[string]string{"layouts": "host,docker", "modes": overlayModes(),
			"workloads": "latency,latency-load,latency-tcp:4K", "sizes": "16"})},
	"multi-flow": {"FALCON Fig. 13: 1-8 flows, UDP 16 B and TCP 4 KiB", fixed(
		map[string]string{"layouts": "host,docker", "modes": overlayModes(),
			"workloads": "multi-flow:16,multi-flow-tcp:4K", "flows": "1,2,4,8"})},
	"memcached": {"FALCON Fig. 18: memcached (4 threads), 550 B values, 1 and 10 clients of 10 connections each, host vs docker (vs falcon); " +
		"the paper drove it with CloudSuite's client and the Twitter dataset, here memcaslap's own mix of 9 gets to 1 set", fixed(
		map[string]string{"layouts": "host,docker", "modes": overlayModes(), "workloads": "memcached:550", "flows": "1,10"})},
	"web": {"FALCON Fig. 17 (web serving), stood in for: nginx serving a static file of 1 KiB and of 64 KiB to wrk --latency over 200 connections, " +
		"host vs docker (vs falcon); the paper ran CloudSuite's web serving (Elgg on nginx, PHP, MySQL, memcached), which cannot be installed here", fixed(
		map[string]string{"layouts": "host,docker", "modes": overlayModes(), "workloads": "web", "sizes": "1K,64K", "flows": "200"})},
	"k8s-rps-rfs": {"the Kubernetes RPS/RFS study: 1-16 iperf3 TCP client/server container pairs (128 KiB writes) on calico, " +
		"baseline vs RPS, RPS+, RFS, RFS+ (vs falcon); 5 runs of 5 s (the study: 30 s)", studyPreset},
	"layouts": {"every layout, vanilla: what each overlay costs (HotCloud '19)", fixed(
		map[string]string{"layouts": strings.Join(Layouts, ","), "modes": "vanilla",
			"workloads": "udp-stress,tcp:128K", "sizes": "16,1400"})},
	"scale": {fmt.Sprintf("a real receiving host on ≥ %d CPUs (roles placed apart): host vs docker, vanilla, rps, rfs, falcon, "+
		"falcon+split; UDP stress 16 B .. 64 KiB, 1-16 flows UDP and TCP, TCP 128 KiB, UDP ping-pong; 3 runs of 5 s", ScaleMinCPUs), scalePreset},
	"calibrate": {"falcon-lab sim's calibration (--calibrate): one iperf3 UDP flow at 64, 512 and 1400 B on docker, vanilla, " +
		"a static cut of the path (RPS of everything after the NIC's poll onto CPU 1), rps, " +
		"falcon with either policy and falcon+split, taking turns; 10 rounds of 4 s with stage costs and BPF statistics: " +
		"odd rounds calibrate, even ones are held out for falcon-lab sim --validate", calibratePreset},
	"mflow7": {"MFLOW Fig. 7: out-of-order segments against the micro-flow batch size, one iperf3 TCP flow of 64 KiB writes on docker, " +
		"vanilla and mflow at batch 16 .. 1024 packets with every flow split (elephant=0), taking turns; 3 runs of 5 s. " +
		"The paper had 100 G NICs and 2 splitting cores beside idle ones; here 2 vCPUs, shared with the sender", fixed(
		map[string]string{"layouts": "docker", "modes": mflow7Modes(), "workloads": "tcp:64K", "flows": "1",
			"duration": "5s", "runs": "3", "interleave": "true"})},
	"mflow8": {"MFLOW Fig. 8 (a): one flow at 16 B .. 64 KiB, UDP (3 sockperf clients into one socket, as the paper) and TCP " +
		"(one iperf3 flow; the paper: a sockperf pair), native (host) vs docker vanilla, rps, falcon and mflow; 3 runs of 5 s. " +
		"mflow runs as mflow:allow-reorder=true,elephant=0, so every flow is split as the paper's one flow was, UDP too, both at the NIC " +
		"(the paper split UDP before the VXLAN device, TCP at the NIC), in batches of 256; " +
		"64 KiB is 65507 B for both (UDP's limit). The paper had 100 G NICs and 2 splitting cores beside idle ones; here 2 vCPUs", fixed(
		map[string]string{"layouts": "host,docker", "modes": "vanilla,rps,falcon,mflow:allow-reorder=true,elephant=0",
			"workloads": "udp-stress,tcp", "sizes": paperSizes, "duration": "5s", "runs": "3"})},
	"never-harm": {"never harm, settled: falcon against vanilla and an A/A control (vanilla@aa) on docker, taking turns, over one UDP flow of 1000 B, " +
		"UDP stress 16 B and 1400 B, one TCP flow, ping-pong 16 B, memcached and nginx; 5 runs of 5 s after 3 s warm-up", fixed(
		map[string]string{"layouts": "docker", "modes": neverHarmModes, "workloads": "udp:1000,udp-stress,tcp:128K,latency:16,memcached:550,web:1K",
			"sizes": "16,1400", "duration": "5s", "warmup": "3s", "runs": "5", "interleave": "true", "max-steal": stealBar})},
	"never-harm-cold": {"never harm, cold: every run a new flow measured from its first packet (no warm-up), many short runs: " +
		"falcon against vanilla and an A/A control on docker, taking turns, over one UDP flow of 1000 B, UDP stress 16 B, one TCP flow and ping-pong 16 B; " +
		"20 runs of 4 s; the run-by-run table has each case's median ratio, its worst run against the vanilla run of its round and falcon's time on the path", fixed(
		map[string]string{"layouts": "docker", "modes": neverHarmModes, "workloads": "udp:1000,udp-stress:16,tcp:128K,latency:16",
			"duration": "4s", "warmup": "0s", "runs": "20", "interleave": "true", "max-steal": stealBar})},
	"scale-kernel": {"the scale preset's UDP cases sent by the kernel sender (--sender kernel) from the first sender CPU: " +
		"UDP stress 16 B .. 1400 B, 1-16 flows of 64 B", scaleKernelPreset},
}

// stealBar: the presets that compare small differences measure a run
// again while the hypervisor takes more than this % of a CPU (--max-steal):
// on 2-vCPU guests, spells of 20-40 % steal cut a window's rate up to 3 x
// for minutes, more than any difference the presets look for.
const stealBar = "5"

// neverHarmModes: falcon beside vanilla, and vanilla again as an A/A
// control: what a ratio of vanilla to itself does on the same machine.
const neverHarmModes = "vanilla,vanilla@aa,falcon"

// mflowBatches are MFLOW Fig. 7's batch sizes, packets per micro-flow.
var mflowBatches = []int{16, 32, 64, 128, 256, 512, 1024}

// mflow7Modes is vanilla and mflow at every batch of mflowBatches,
// splitting every flow.
func mflow7Modes() string {
	m := []string{"vanilla"}
	for _, n := range mflowBatches {
		m = append(m, fmt.Sprintf("mflow:batch=%d,elephant=0", n))
	}
	return strings.Join(m, ",")
}

// paperSizes are FALCON's message sizes, 16 B .. 64 KiB (65507: the largest
// UDP payload).
const paperSizes = "16,64,256,1K,1400,4K,16K,65507"

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var n []string
	for k := range presets {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// PresetSummary is a preset's one line, "" for no preset (the report's
// subtitle of a file that ran it).
func PresetSummary(name string) string { return presets[name].summary }

// PresetModes are the modes a preset runs (nil for none, or a preset whose
// modes depend on the machine).
func PresetModes(name string) []string {
	p, ok := presets[name]
	if !ok || p.flags == nil {
		return nil
	}
	m, err := p.flags(nil)
	if err != nil || m["modes"] == "" {
		return nil
	}
	return strings.Split(m["modes"], ",")
}

// PresetHelp describes the presets for the usage text.
func PresetHelp() string {
	var b strings.Builder
	for _, n := range PresetNames() {
		if _, fig := lookupFigure(n); !fig {
			fmt.Fprintf(&b, "  %-12s %s\n", n, presets[n].summary)
		}
	}
	b.WriteString(figureHelp())
	return b.String()
}
