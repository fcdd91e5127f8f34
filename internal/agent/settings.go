package agent

import (
	"cmp"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/policy"
	"github.com/falconnet/falcon/internal/quote"
)

// The settings of the modes: each is at once the flag --NAME of enable and
// agent and the key NAME of a mode spec (falcon:NAME=value), parsed,
// checked and written back here, once. Adding a setting is one entry in
// this table, plus the Options field it sets.
var settings = []setting{
	cpuSetting("cpus", "CPUs that may run the stages after the NIC, e.g. 0-3,6 (default: all online)",
		func(o *Options) *[]int { return &o.CPUs }, ModeFalcon),
	{name: "threshold", arg: "PCT", impls: []string{ModeFalcon},
		usage: "busy percent at which a CPU takes no new flows and, on average over the CPUs, falcon steps aside",
		set: func(o *Options, v string) error {
			t, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
			if err != nil {
				return fmt.Errorf("%s: want a percentage 0..100", quote.Short(v))
			}
			o.Threshold = t
			return nil
		},
		get:   func(o *Options) string { return strconv.Itoa(o.Threshold) },
		check: func(o *Options) error { return datapath.CheckThreshold(o.Threshold) }},
	durationSetting("interval", "how often CPU load is sampled from /proc/stat",
		func(o *Options) *time.Duration { return &o.Interval }, time.Millisecond, 10*time.Second),
	{name: "policy", arg: strings.Join(policy.Names(), "|"), impls: []string{ModeFalcon}, usage: policy.Usage(),
		set: func(o *Options, v string) error {
			if _, ok := policy.Lookup(v); !ok {
				return fmt.Errorf("%s: want %s", quote.Short(v), policy.Choices())
			}
			o.Policy = v
			return nil
		},
		get: func(o *Options) string { return o.Policy }},
	boolSetting("always-on", "never keep stages inline because the CPU set is busy on average; a CPU's own load still counts (FALCON Fig. 15's always-on; true/false)",
		func(o *Options) *bool { return &o.AlwaysOn }, ModeFalcon),
	durationSetting("guard-timeout", "idle time after which the ordering guard stops waiting for a flow's packets lost on the way",
		func(o *Options) *time.Duration { return &o.GuardTimeout }, time.Millisecond, time.Minute),
	durationSetting("drain-timeout", "how long disable waits for steered flows to come back inline, each once none of its packets is "+
		"queued behind a hook; a flow that never pauses that long may have packets overtaken when falcon detaches (logged)",
		func(o *Options) *time.Duration { return &o.DrainTimeout }, time.Millisecond, 50*time.Second),
	{name: "order", arg: "guarded|per-packet", impls: []string{ModeFalcon},
		usage: "guarded: a flow moves only when none of its packets is still queued; per-packet: choose per packet as the paper did (may reorder)",
		set: func(o *Options, v string) error {
			switch v {
			case "guarded", "flowlet", "per-packet": // flowlet: the name before the guard
				o.PerPacket = v == "per-packet"
				return nil
			}
			return fmt.Errorf("%s: want guarded or per-packet", quote.Short(v))
		},
		get: func(o *Options) string {
			if o.PerPacket {
				return "per-packet"
			}
			return "guarded"
		}},
	{name: "devices", arg: "auto|LIST", usage: "auto, or the VXLAN devices to accelerate, comma-separated, optionally with the NIC",
		set: func(o *Options, v string) error {
			o.Devices = nil
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" && v != "auto" {
					o.Devices = append(o.Devices, d)
				}
			}
			return nil
		},
		get: func(o *Options) string {
			if len(o.Devices) == 0 {
				return "auto"
			}
			return strings.Join(o.Devices, ",")
		}},
	boolSetting("container-level", "rps/rfs modes: also set the containers' eth0, from the host side (the study's RPS+ and RFS+; true/false)",
		func(o *Options) *bool { return &o.ContainerLevel }, ModeRPS, ModeRFS),
	cpuSetting("rps-cpus", "rps mode: the CPUs written to rps_cpus (default: all online, as the study); "+
		"rfs mode: also set rps_cpus, so that flows with no socket CPU yet get plain RPS (default: left alone, as the study)",
		func(o *Options) *[]int { return &o.RPSCPUs }, ModeRPS, ModeRFS),
	{name: "flow-entries", arg: "N", impls: []string{ModeRFS},
		usage: fmt.Sprintf("rfs mode: net.core.rps_sock_flow_entries, a power of two; each receive queue's "+
			"rps_flow_cnt gets this divided by its device's queue count (default %d, as the study and the kernel's scaling.rst)", DefaultFlowEntries),
		set: func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("%s: want a power of two from 1 to %d (default %d; 0 would switch RFS off, which is 'falcon disable')", quote.Short(v), MaxFlowEntries, DefaultFlowEntries)
			}
			o.FlowEntries = n
			return nil
		},
		get: func(o *Options) string {
			if o.FlowEntries == 0 {
				return ""
			}
			return strconv.Itoa(o.FlowEntries)
		}},
	boolSetting("split", "falcon mode: move the NIC stage (skb allocation, GRO from Linux 6.15, IP, UDP, VXLAN) off "+
		"the interrupt CPU with native XDP and a cpumap (true/false)", func(o *Options) *bool { return &o.Split }, ModeFalcon),
	{name: "fastpath", impls: []string{ModeFalcon}, boolean: true,
		usage: "falcon mode: run the cached fast path too, so a cached flow's fused stage is the one falcon places " +
			"(true/false, or " + FastpathAuto + ": where its checks pass, steering alone where they do not)",
		set: func(o *Options, v string) error {
			o.FastpathAuto = v == FastpathAuto
			if o.FastpathAuto {
				o.Fastpath = true
				return nil
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: want true, false or %s", quote.Short(v), FastpathAuto)
			}
			o.Fastpath = b
			return nil
		},
		get: func(o *Options) string {
			if o.Fastpath && o.FastpathAuto {
				return FastpathAuto
			}
			return strconv.FormatBool(o.Fastpath)
		}},
	boolSetting("sender-rps", "fast path: RPS on every container's host-side veth, to the --cpus set, and each flow's data "+
		"queued on the backlog of the CPU that sent its first (its application's), so that a flow a container sends leaves "+
		"the host in the order it was sent (the kernel sends TCP from two CPUs' backlogs and can reorder it) (true/false)",
		func(o *Options) *bool { return &o.SenderRPS }, ModeFalcon, ModeFastpath),
	cpuSetting("split-cpus", "--split: the CPUs that may build the NIC stage's skbs (default: the --cpus set)",
		func(o *Options) *[]int { return &o.SplitCPUs }, ModeFalcon),
	{name: "split-proto", arg: datapath.SplitTCP + "|" + datapath.SplitUDP + "|" + datapath.SplitAll, impls: []string{ModeFalcon}, usage: "--split: split only inner tcp or udp flows, or all (default)",
		set: func(o *Options, v string) error { o.SplitProto = v; return nil },
		get: func(o *Options) string { return o.SplitProto },
		check: func(o *Options) error {
			switch o.SplitProto {
			case "", datapath.SplitAll, datapath.SplitTCP, datapath.SplitUDP:
				return nil
			}
			return fmt.Errorf("%s: want %s, %s or %s", quote.Short(o.SplitProto), datapath.SplitTCP, datapath.SplitUDP, datapath.SplitAll)
		}},
	{name: "host-nics", arg: "LIST", impls: []string{ModeFalcon},
		usage: "--split: also split the NIC stage of these devices of the host network itself, for its own sockets, " +
			"with or without an overlay (FALCON's Host+); comma-separated, e.g. eth0",
		set: func(o *Options, v string) error {
			o.HostNICs = nil
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					o.HostNICs = append(o.HostNICs, d)
				}
			}
			return nil
		},
		get: func(o *Options) string { return strings.Join(o.HostNICs, ",") },
		check: func(o *Options) error {
			for i, d := range o.HostNICs {
				if len(d) > 15 || strings.ContainsAny(d, "/ ") {
					return fmt.Errorf("%s: not a device name", quote.Short(d))
				}
				if slices.Contains(o.HostNICs[:i], d) {
					return fmt.Errorf("%s named twice", d)
				}
			}
			return nil
		}},
	{name: "batch", arg: "N", impls: []string{ModeFalcon},
		usage: fmt.Sprintf("mode mflow: packets per micro-flow; an elephant's packets go to the split CPUs in turns of this many "+
			"(default none: no micro-flows; mode mflow sets MFLOW's %d)", DefaultBatch),
		set: func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > datapath.MaxBatch {
				return fmt.Errorf("%s: want 1..%d packets (without micro-flows, use mode falcon+split)", quote.Short(v), datapath.MaxBatch)
			}
			o.Batch = n
			return nil
		},
		get: func(o *Options) string {
			if o.Batch == 0 {
				return ""
			}
			return strconv.Itoa(o.Batch)
		},
		check: func(o *Options) error {
			if o.Batch < 0 || o.Batch > datapath.MaxBatch {
				return fmt.Errorf("%d: want 1..%d packets", o.Batch, datapath.MaxBatch)
			}
			return nil
		}},
	{name: "elephant", arg: "RATE", impls: []string{ModeFalcon},
		usage: "mode mflow: the rate from which a flow is split into micro-flows, in bit/s with k, M or G, e.g. 500M; 0 splits every flow",
		set: func(o *Options, v string) error {
			r, err := parseRate(v)
			if err != nil {
				return err
			}
			o.Elephant = r
			return nil
		},
		get: func(o *Options) string { return formatRate(o.Elephant) }},
	boolSetting("allow-reorder", "mode mflow: split UDP flows too; their micro-flows reach the socket out of order, "+
		"which UDP does not repair (TCP's out-of-order queue does) (true/false)",
		func(o *Options) *bool { return &o.AllowReorder }, ModeFalcon),
	{name: "metrics-addr", arg: "HOST:PORT", process: true,
		usage: "serve Prometheus metrics on HOST:PORT, e.g. 127.0.0.1:9750 (default: off); bound before anything is attached",
		set:   func(o *Options, v string) error { o.MetricsAddr = v; return nil },
		get:   func(o *Options) string { return o.MetricsAddr },
		check: func(o *Options) error { return CheckMetricsAddr(o.MetricsAddr) }},
	{name: "log-format", arg: LogText + "|" + LogJSON, process: true, usage: "the agent's log lines: text or json (default text)",
		set: func(o *Options, v string) error { o.LogFormat = v; return nil },
		get: func(o *Options) string { return o.LogFormat },
		check: func(o *Options) error {
			switch o.LogFormat {
			case "", LogText, LogJSON:
				return nil
			}
			return fmt.Errorf("%s: want %s or %s", quote.Short(o.LogFormat), LogText, LogJSON)
		}},
}

// A setting is one knob of Options.
type setting struct {
	name  string
	arg   string // what the value looks like in the synopsis ("" for a boolean)
	usage string
	// impls are the implementations it belongs to (nil: all); a mode spec
	// takes only theirs, while the flags take all and Options.validate
	// says which do not fit the mode.
	impls []string
	set   func(o *Options, v string) error // parse v into o
	get   func(o *Options) string          // o's value as set takes it; "" when unset
	// check is the range check, for values however they were set (nil:
	// set's parsing is check enough).
	check   func(o *Options) error
	boolean bool // --name alone means true
	// process: a setting of the agent process (where it logs, where it
	// serves metrics), a flag of enable and agent but no key of a mode spec:
	// bench's modes and a mode's spelling know nothing of it.
	process bool
}

// apply parses v into o and checks it.
func (s *setting) apply(o *Options, v string) error {
	if err := s.set(o, v); err != nil {
		return err
	}
	if s.check != nil {
		return s.check(o)
	}
	return nil
}

func lookupSetting(name, impl string) *setting {
	for i := range settings {
		if s := &settings[i]; s.name == name && (impl == "" || !s.process && (s.impls == nil || slices.Contains(s.impls, impl))) {
			return s
		}
	}
	return nil
}

func settingNames(impl string) []string {
	var out []string
	for _, s := range settings {
		if !s.process && (s.impls == nil || slices.Contains(s.impls, impl)) {
			out = append(out, s.name)
		}
	}
	return out
}

func cpuSetting(name, usage string, field func(o *Options) *[]int, impls ...string) setting {
	return setting{name: name, arg: "LIST", usage: usage, impls: impls,
		set: func(o *Options, v string) error {
			c, err := cpuset.Parse(v)
			if err == nil {
				*field(o) = c
			}
			return err
		},
		get: func(o *Options) string { return cpuset.Format(*field(o)) }}
}

// durationSetting is a falcon duration from lo to hi (hi 0: no upper bound).
func durationSetting(name, usage string, field func(o *Options) *time.Duration, lo, hi time.Duration) setting {
	return setting{name: name, arg: "DUR", usage: usage, impls: []string{ModeFalcon},
		set: func(o *Options, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: want a duration such as 10ms", quote.Short(v))
			}
			*field(o) = d
			return nil
		},
		get: func(o *Options) string { return field(o).String() },
		check: func(o *Options) error {
			switch d := *field(o); {
			case d < lo && lo == 0:
				return fmt.Errorf("%v is negative", d)
			case d < lo || hi > 0 && d > hi:
				return fmt.Errorf("%v: want %v..%v", d, lo, hi)
			}
			return nil
		}}
}

func boolSetting(name, usage string, field func(o *Options) *bool, impls ...string) setting {
	return setting{name: name, usage: usage, impls: impls, boolean: true,
		set: func(o *Options, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: want true or false", quote.Short(v))
			}
			*field(o) = b
			return nil
		},
		get: func(o *Options) string { return strconv.FormatBool(*field(o)) }}
}

// checkSettings runs every setting's range check on o, however it was set.
func checkSettings(o *Options) error {
	for _, s := range settings {
		if s.check != nil {
			if err := s.check(o); err != nil {
				return fmt.Errorf("--%s %v", s.name, err)
			}
		}
	}
	return nil
}

// Flags are the command line of enable and agent: --netns, --mode and a
// flag per setting. They are strings so that an empty value means the
// default: the Kubernetes DaemonSet passes every ConfigMap key, set or not.
type Flags struct {
	netns, mode string
	modeDir     string // agent's --mode-config (nodemode.go)
	node        string // agent's --node-name
	values      map[string]*string
	given       []string // setting flags in the order given
}

// Synopsis is the usage line of enable's and agent's flags: --netns,
// --mode and every setting.
func Synopsis() string {
	parts := []string{"[--netns HOSTNS]", "[--mode NAME[:KEY=VALUE,…]]"}
	for _, s := range settings {
		if s.boolean {
			parts = append(parts, "[--"+s.name+"]")
		} else {
			parts = append(parts, "[--"+s.name+" "+s.arg+"]")
		}
	}
	return strings.Join(parts, " ")
}

// AddFlags defines enable's and agent's flags on fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{values: map[string]*string{}}
	fs.StringVar(&f.netns, "netns", "", "host network namespace to accelerate (name under /run/netns or a path; default: the current one)")
	fs.StringVar(&f.mode, "mode", "", "the mode, name[:key=value,…] with the keys of the flags below (default "+DefaultMode+"):\n"+ModeHelp())
	def := DefaultOptions()
	for _, s := range settings {
		v := new(string)
		f.values[s.name] = v
		usage := s.usage
		if !strings.Contains(usage, "(default") {
			usage += " (default " + s.get(&def) + ")"
		}
		fs.Var(flagValue{f, s.name, v, s.boolean}, s.name, usage)
	}
	return f
}

// flagValue is a setting's flag. A boolean one may also stand alone:
// --split means true, --split=false false, and --split= (an empty
// ConfigMap key) the default.
type flagValue struct {
	f       *Flags
	name    string
	s       *string
	boolean bool
}

func (v flagValue) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

func (v flagValue) Set(s string) error {
	*v.s = s
	v.f.given = append(v.f.given, v.name)
	return nil
}

func (v flagValue) IsBoolFlag() bool { return v.boolean }

// Options builds the options the flags describe: the defaults, the mode
// with its settings, then each setting flag given. Errors are
// *SettingError.
func (f *Flags) Options() (Options, error) {
	o := DefaultOptions()
	o.Netns = f.netns
	switch {
	case f.modeDir != "":
		if err := f.nodeMode(&o); err != nil {
			return o, err
		}
	default:
		if err := ParseMode(cmp.Or(f.mode, DefaultMode), &o); err != nil {
			return o, err
		}
	}
	for _, name := range f.given {
		v := *f.values[name]
		if v == "" {
			continue
		}
		if err := lookupSetting(name, "").apply(&o, v); err != nil {
			return o, settingErrorf("--%s %v", name, err)
		}
	}
	return o, nil
}

// Args writes o back as agent flags, the settings that differ from the
// defaults: the command line of the agent that enable starts.
func Args(o Options) []string {
	a := []string{"--mode=" + o.Mode}
	if o.Netns != "" {
		a = append(a, "--netns="+o.Netns)
	}
	def := DefaultOptions()
	for _, s := range settings {
		if v := s.get(&o); v != s.get(&def) {
			a = append(a, "--"+s.name+"="+v)
		}
	}
	return a
}
