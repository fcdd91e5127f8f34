package bench

import (
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// Flags holds the raw command-line values; Resolve turns them into a
// checked Config.
type Flags struct {
	fs                                *flag.FlagSet
	layouts, modes, workloads, sizes  string
	flows, senderCPUs, receiverCPUs   string
	nicCPU, falconCPUs                string
	rates, hotspotRate                string
	preset, baseline, json            string
	sender                            string
	containers                        string
	duration, warmup                  time.Duration
	runs, clients, rate               int
	maxSteal                          float64
	quiet, bpfStats, interleave, ipv6 bool
	stageCost, calibrate, quick       bool
	orderCheck                        bool
	resume                            bool
}

// RegisterFlags defines bench's flags on fs.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.layouts, "layouts", "host,docker", "testbed layouts: "+strings.Join(Layouts, ", "))
	fs.StringVar(&f.modes, "modes", "vanilla", "datapath modes, each NAME[:KEY=VALUE,…] with the settings of 'falcon enable' as keys "+
		"(e.g. vanilla,falcon:threshold=90,falcon+split; modes: "+strings.Join(modes.Names(), ", ")+")")
	fs.StringVar(&f.workloads, "workloads", "udp-stress,tcp:128K", "workloads (listed below); \"name:SIZE\" runs that workload at SIZE only, not at --sizes")
	fs.StringVar(&f.sizes, "sizes", "16,1400", "message sizes, 16 B .. 64K (e.g. 16,1400,4K,64K; UDP and sockperf stop at 65507, TCP at 1M)")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "measurement window of each run")
	fs.DurationVar(&f.warmup, "warmup", 500*time.Millisecond, "traffic before each window that is not measured")
	fs.IntVar(&f.runs, "runs", 5, "runs per case")
	fs.StringVar(&f.flows, "flows", "4", "flow counts for the multi-flow workloads (e.g. 1,2,4,8); memcached's clients, web's connections")
	fs.IntVar(&f.clients, "clients", 3, "udp-stress clients sending into the one server socket")
	fs.StringVar(&f.senderCPUs, "sender-cpus", "auto", "CPUs the clients are pinned to, round robin (auto: 0 on ≤7 CPUs, 0-2 on more)")
	fs.StringVar(&f.receiverCPUs, "receiver-cpus", "auto", "CPUs the servers are pinned to, round robin (auto: 1, or 3 on ≥8 CPUs; 0 on one CPU)")
	fs.StringVar(&f.nicCPU, "nic-cpu", "none", "the CPU that runs the receiving host's NIC poll (GRO, XDP, the first stage), "+
		"as a core taking a real NIC's interrupts: its NAPI is made threaded and pinned there (none: it runs on the sending CPU)")
	fs.StringVar(&f.falconCPUs, "falcon-cpus", "auto", "the CPUs falcon may steer stages to (and rps writes to rps_cpus), "+
		"unless a mode names its own (auto: the mode's default, all online CPUs)")
	fs.StringVar(&f.sender, "sender", schema.SenderTools, "what sends: tools (iperf3 and sockperf clients in the sending containers) or kernel "+
		"(falcon's kernel sender: the overlay's own frame of each flow, learned once, sent by XDP in live-frame mode from the sending host's wire, "+
		"as a remote host would send it; UDP workloads up to "+workload.FormatSize(MaxKernelSize)+")")
	fs.IntVar(&f.rate, "rate", 10000, "messages/s of latency-load and latency-load-tcp")
	fs.Float64Var(&f.maxSteal, "max-steal", 0, "measure a run again, up to 3 times, while the hypervisor took more than this % of any CPU "+
		"(steal time: another guest's load, not the case's); 0 never does")
	fs.StringVar(&f.rates, "rates", DefaultRates, "the rates and rates-tcp workloads' rates, a case each: bit rates as iperf3's -b takes them "+
		"(K, M, G decimal: 100M,1G) or packet rates (400Kpps; UDP only)")
	fs.StringVar(&f.hotspotRate, "hotspot-rate", "20Kpps", "the rate of each hotspot and hotspot-tcp flow while light (as --rates: 20Kpps, 200M; for hotspot-tcp a packet rate counts full 1448 B segments)")
	fs.StringVar(&f.containers, "containers", "1", "containers per host (container layouts), or \"flows\": one client and one server container per flow, on a testbed per flow count")
	fs.StringVar(&f.json, "json", "", "write the results file `FILE`")
	fs.StringVar(&f.preset, "preset", "", "start from a preset ("+strings.Join(PresetNames(), ", ")+"; "+PaperAll+" runs every figure's); flags given override it")
	fs.StringVar(&f.baseline, "baseline", "auto", "what normalisation divides by: LAYOUT/MODE, or auto (host/vanilla of the same workload and size, else vanilla of the same layout)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
	fs.BoolVar(&f.interleave, "interleave", false, "alternate the modes run by run on one testbed per layout (each round sets every mode up, "+
		"runs each case once and undoes it) and divide each run by the baseline's run of the same round: against a shared machine's drift")
	fs.BoolVar(&f.ipv6, "ipv6", false, "build every testbed over IPv6 only (wire, overlay, containers); iperf3's workloads and web only: Debian's sockperf (3.7) has no IPv6")
	fs.BoolVar(&f.bpfStats, "bpf-stats", false, "record each falcon BPF program's cost per run (kernel BPF statistics on; they add two clock reads per run)")
	fs.BoolVar(&f.stageCost, "stage-cost", false, "record the NET_RX softirq time, skbs and segments of each receive stage of the receiving host (nic, vxlan, container, …) per CPU "+
		"and run (BPF on four kernel tracepoints; they add a few BPF runs per packet)")
	fs.BoolVar(&f.orderCheck, "order-check", false, "count, per run of a TCP workload over IPv4, the data segments that reached the servers' devices "+
		"after one their sender transmitted later (the IP ID numbers a connected socket's segments as sent, retransmissions included: "+
		"exact under loss, where the receiver's out-of-order queue also counts holes); a BPF program on net:netif_receive_skb, a few runs per packet")
	fs.BoolVar(&f.quick, "quick", false, "a smoke test of any preset or flags: one run per case of 1s after 500ms warm-up, "+
		"and a sweep of more than three sizes or flow counts cut to its smallest, middle and largest (--runs, --duration and --warmup given win)")
	fs.BoolVar(&f.calibrate, "calibrate", false, "measure what each stage of the receive path costs, for falcon-lab sim: --preset calibrate, "+
		"and the file records the calibration format")
	fs.BoolVar(&f.resume, "resume", false, "--preset "+PaperAll+": do not run again a figure whose results file in the --json directory is complete, "+
		"without failures, and ran the same bench: a run of hours taken up again where it stopped")
	return f
}

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
			"workloads": "udp-stress:16,tcp:128K,latency-tcp:16", "duration": "2s", "runs": "3", "interleave": "true"})},
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
			"sizes": "16,1400", "duration": "5s", "warmup": "3s", "runs": "5", "interleave": "true"})},
	"never-harm-cold": {"never harm, cold: every run a new flow measured from its first packet (no warm-up), many short runs: " +
		"falcon against vanilla and an A/A control on docker, taking turns, over one UDP flow of 1000 B, UDP stress 16 B, one TCP flow and ping-pong 16 B; " +
		"20 runs of 4 s; the run-by-run table has each case's median ratio, its worst run against the vanilla run of its round and falcon's time on the path", fixed(
		map[string]string{"layouts": "docker", "modes": neverHarmModes, "workloads": "udp:1000,udp-stress:16,tcp:128K,latency:16",
			"duration": "4s", "warmup": "0s", "runs": "20", "interleave": "true"})},
	"scale-kernel": {"the scale preset's UDP cases sent by the kernel sender (--sender kernel) from the first sender CPU: " +
		"UDP stress 16 B .. 1400 B, 1-16 flows of 64 B", scaleKernelPreset},
}

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

// Resolve applies the preset under the flags given, parses and checks every
// value, and picks CPUs among online ones. It touches nothing on the
// system; errors are *ConfigError.
func (f *Flags) Resolve(online []int) (schema.Config, error) {
	if f.resume {
		return schema.Config{}, configErrorf("--resume takes up --preset %s where it stopped; one bench has nothing to take up", PaperAll)
	}
	if err := f.applyPreset(online); err != nil {
		return schema.Config{}, err
	}
	c := schema.Config{Preset: f.preset, Quick: f.quick, Duration: schema.Duration(f.duration), Warmup: schema.Duration(f.warmup), Runs: f.runs,
		Clients: f.clients, Rate: f.rate, JSON: f.json, Quiet: f.quiet, BPFStats: f.bpfStats,
		StageCost: f.stageCost, OrderCheck: f.orderCheck, Interleave: f.interleave, IPv6: f.ipv6, MaxStealPct: f.maxSteal}
	if f.preset == "calibrate" {
		c.Calibrate = schema.CalibrateFormat
	}
	for _, step := range []func(*schema.Config) error{f.resolveMatrix, checkRunShape, f.resolveContainers,
		func(c *schema.Config) error { return f.resolveCPUs(c, online) }, f.resolveBaseline, f.resolveRates} {
		if err := step(&c); err != nil {
			return c, err
		}
	}
	if c.Quick {
		c.Rates = quickCutOrdered(c.Rates)
	}
	// Expanding the matrix checks every workload entry and size.
	if _, _, err := Plan(c); err != nil {
		return c, err
	}
	return c, nil
}

// applyPreset sets the flags of --preset (and --calibrate's) and --quick
// that were not given.
func (f *Flags) applyPreset(online []int) error {
	if f.calibrate {
		if f.preset != "" && f.preset != "calibrate" {
			return configErrorf("--calibrate runs the calibrate preset, not --preset %s", f.preset)
		}
		f.preset = "calibrate"
	}
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if f.preset != "" {
		if err := checkRunnable(f.preset); err != nil {
			return err
		}
		p, ok := presets[f.preset]
		if !ok {
			return configErrorf("unknown preset %q (known: %s)", f.preset, strings.Join(PresetNames(), ", "))
		}
		values, err := p.flags(online)
		if err != nil {
			return err
		}
		for name, v := range values {
			if !given[name] {
				if err := f.fs.Set(name, v); err != nil {
					return fmt.Errorf("preset %s: flag %s=%s: %v", f.preset, name, v, err)
				}
			}
		}
	}
	if f.quick {
		return f.quickDefaults(given)
	}
	return nil
}

// resolveMatrix reads the matrix's dimensions: layouts, modes, sender,
// workloads, sizes and flows.
func (f *Flags) resolveMatrix(c *schema.Config) error {
	var err error
	if c.Layouts, err = names("layout", f.layouts, Layouts); err != nil {
		return err
	}
	for _, m := range schema.SplitModes(f.modes) {
		if _, err := modes.Lookup(m); err != nil {
			return &ConfigError{Msg: err.Error()}
		}
		if !slices.Contains(c.Modes, m) {
			c.Modes = append(c.Modes, m)
		}
	}
	if len(c.Modes) == 0 {
		return configErrorf("--modes: none given")
	}
	if c.Sender = f.sender; c.Sender != schema.SenderTools && c.Sender != schema.SenderKernel {
		return configErrorf("--sender %q: want %s or %s", f.sender, schema.SenderTools, schema.SenderKernel)
	}
	c.Workloads = splitList(f.workloads)
	if len(c.Workloads) == 0 {
		return configErrorf("--workloads: none given")
	}
	if c.Sizes, err = parseSizes(f.sizes); err != nil {
		return configErrorf("--sizes: %v", err)
	}
	if c.Flows, err = parseInts(f.flows, 1); err != nil {
		return configErrorf("--flows: %v", err)
	}
	if c.Quick {
		c.Sizes, c.Flows = quickCut(c.Sizes), quickCut(c.Flows)
	}
	return nil
}

// checkRunShape checks the order check's workloads and each run's
// length, count, clients and rate.
func checkRunShape(c *schema.Config) error {
	if c.OrderCheck {
		switch tcp := slices.ContainsFunc(c.Workloads, func(w string) bool { n, _, _ := strings.Cut(w, ":"); return workload.IsTCP(n) }); {
		case c.IPv6:
			return configErrorf("--order-check numbers TCP segments by their IPv4 ID: not with --ipv6")
		case !tcp:
			return configErrorf("--order-check checks TCP workloads, and none of --workloads %s is one", strings.Join(c.Workloads, ","))
		}
	}
	switch {
	case c.Duration < schema.Duration(time.Second):
		return configErrorf("--duration %s: at least 1s (the tools count whole seconds)", c.Duration)
	case c.Warmup < 0:
		return configErrorf("--warmup %s: must not be negative", c.Warmup)
	case c.Runs < 1:
		return configErrorf("--runs %d: at least 1", c.Runs)
	case c.MaxStealPct < 0 || c.MaxStealPct >= 100:
		return configErrorf("--max-steal %g: a percentage from 0 (off) to below 100", c.MaxStealPct)
	case c.Clients < 1:
		return configErrorf("--clients %d: at least 1", c.Clients)
	case c.Rate < 200:
		// Slower traffic is too sparse for the start-of-traffic detection.
		return configErrorf("--rate %d: at least 200 messages/s", c.Rate)
	}
	return nil
}

// resolveContainers reads --containers: a count, or one per flow.
func (f *Flags) resolveContainers(c *schema.Config) error {
	if f.containers == "flows" {
		c.ContainersPerFlow = true
		if n := slices.Max(c.Flows); n > testbed.MaxContainers {
			return configErrorf("--containers flows: %d flows need %d containers per host, more than a testbed has (%d)", n, n, testbed.MaxContainers)
		}
		return nil
	}
	n, err := strconv.Atoi(f.containers)
	if err != nil || n < 1 || n > testbed.MaxContainers {
		return configErrorf("--containers %q: want 1 .. %d, or flows", f.containers, testbed.MaxContainers)
	}
	c.Containers = n
	return nil
}

// resolveCPUs reads where the roles run, and checks the placement.
func (f *Flags) resolveCPUs(c *schema.Config, online []int) error {
	def := defaultCPUs(online)
	var err error
	if c.SenderCPUs, err = cpus("--sender-cpus", f.senderCPUs, def.sender, online); err != nil {
		return err
	}
	if c.ReceiverCPUs, err = cpus("--receiver-cpus", f.receiverCPUs, def.receiver, online); err != nil {
		return err
	}
	if f.falconCPUs != "auto" {
		if c.FalconCPUs, err = cpus("--falcon-cpus", f.falconCPUs, nil, online); err != nil {
			return err
		}
	}
	if f.nicCPU != "none" {
		list, err := cpus("--nic-cpu", f.nicCPU, nil, online)
		if err != nil {
			return err
		}
		if len(list) != 1 {
			return configErrorf("--nic-cpu %s: one CPU (a NIC's interrupt core), or none", f.nicCPU)
		}
		c.NICCPU = &list[0]
	}
	return checkPlacement(c.Placement())
}

// resolveBaseline reads --baseline: auto, or LAYOUT/MODE (MODE vanilla
// when left out).
func (f *Flags) resolveBaseline(c *schema.Config) error {
	c.Baseline = f.baseline
	if c.Baseline == "auto" {
		return nil
	}
	l, m, ok := strings.Cut(c.Baseline, "/")
	if !ok {
		m = schema.Vanilla
	}
	if !contains(Layouts, l) || !contains(c.Modes, m) && !knownMode(m) {
		return configErrorf("--baseline %q: want auto or LAYOUT/MODE, e.g. host/vanilla", c.Baseline)
	}
	c.Baseline = l + "/" + m
	return nil
}

func names(what, list string, known []string) ([]string, error) {
	var out []string
	for _, n := range splitList(list) {
		if !contains(known, n) {
			return nil, configErrorf("unknown %s %q (known: %s)", what, n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, configErrorf("--%ss: none given", what)
	}
	return out, nil
}

func knownMode(spec string) bool {
	_, err := modes.Lookup(spec)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type cpuDefaults struct{ sender, receiver []int }

// defaultCPUs keeps sender and receiver apart and, on bigger machines,
// leaves most CPUs idle so a mode that spreads softirqs has room: on 2
// CPUs the sender (and the first receive stages it runs) takes CPU 0 and
// the receiving application CPU 1; from 8 CPUs on, three senders get CPUs
// 0-2 and the receiver CPU 3, leaving 4.. free.
func defaultCPUs(online []int) cpuDefaults {
	switch {
	case len(online) >= 8:
		return cpuDefaults{online[:3], online[3:4]}
	case len(online) >= 2:
		return cpuDefaults{online[:1], online[1:2]}
	case len(online) == 1:
		return cpuDefaults{online, online}
	}
	return cpuDefaults{[]int{0}, []int{0}}
}

func cpus(flagName, v string, def, online []int) ([]int, error) {
	if v == "auto" {
		return def, nil
	}
	list, err := cpuset.Parse(v)
	if err != nil {
		return nil, configErrorf("%s: %v", flagName, err)
	}
	for _, c := range list {
		if !containsInt(online, c) {
			return nil, configErrorf("%s: CPU %d is not online (online: %s)", flagName, c, cpuset.Format(online))
		}
	}
	return list, nil
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
