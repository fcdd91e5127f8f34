package bench

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// clientRPSSender is --client-host-rps's default: the sending host's
// receive work on the sender CPUs (schema.Config.ClientHostRPS "").
const clientRPSSender = "sender"

// Flags holds the raw command-line values; Resolve turns them into a
// checked Config.
type Flags struct {
	fs                                *flag.FlagSet
	layouts, modes, workloads, sizes  string
	flows, senderCPUs, receiverCPUs   string
	nicCPU, falconCPUs, clientRPS     string
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
	fs.StringVar(&f.clientRPS, "client-host-rps", clientRPSSender, "where the sending host's own receive work (ACKs, replies) runs: sender "+
		"(RPS of its wire to --sender-cpus, as on a client's own machine) or off (on the CPU that polls that wire, "+
		"with no RPS IPI; on one machine a flow's ACKs may then follow the receiver's stages)")
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
	switch f.clientRPS {
	case clientRPSSender:
	case schema.ClientHostRPSOff:
		c.ClientHostRPS = schema.ClientHostRPSOff
	default:
		return configErrorf("--client-host-rps %q: want sender or off", f.clientRPS)
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
