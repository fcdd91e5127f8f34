package agent

import (
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseMode: a mode spec sets the implementation, the settings the
// mode fixes and those given; every mistake says what would be right.
func TestParseMode(t *testing.T) {
	for spec, want := range map[string]func(o *Options){
		"falcon":       func(o *Options) {},
		"falcon+split": func(o *Options) { o.Split = true },
		"rps+":         func(o *Options) { o.Mode, o.ContainerLevel = ModeRPS, true },
		"rfs":          func(o *Options) { o.Mode = ModeRFS },
		"falcon:threshold=90,cpus=0-1,4,order=per-packet": func(o *Options) {
			o.Threshold, o.CPUs, o.PerPacket = 90, []int{0, 1, 4}, true
		},
		"falcon+split:split-cpus=1,split-proto=udp,interval=20ms": func(o *Options) {
			o.Split, o.SplitCPUs, o.SplitProto, o.Interval = true, []int{1}, "udp", 20*time.Millisecond
		},
		"rfs+:flow-entries=4096":              func(o *Options) { o.Mode, o.ContainerLevel, o.FlowEntries = ModeRFS, true, 4096 },
		"falcon:policy=static,always-on=true": func(o *Options) { o.Policy, o.AlwaysOn = "static", true },
		"mflow":                               func(o *Options) { o.Split, o.Batch, o.Policy = true, DefaultBatch, "paper" },
		"mflow:batch=16,elephant=0,allow-reorder=true": func(o *Options) {
			o.Split, o.Batch, o.Policy, o.Elephant, o.AllowReorder = true, 16, "paper", 0, true
		},
		"mflow:elephant=2.5G": func(o *Options) { o.Split, o.Batch, o.Policy, o.Elephant = true, DefaultBatch, "paper", 2_500_000_000 },
	} {
		got, exp := DefaultOptions(), DefaultOptions()
		exp.Mode = ModeFalcon
		want(&exp)
		if err := ParseMode(spec, &got); err != nil || !reflect.DeepEqual(got, exp) {
			t.Errorf("ParseMode(%q) = %+v, %v; want %+v", spec, got, err, exp)
		}
	}
	for spec, msg := range map[string]string{
		"falcon9":                  `unknown mode "falcon9": want one of auto, falcon, falcon+fastpath, falcon+split, falcon+split+fastpath, fastpath, mflow, rfs, rfs+, rps, rps+`,
		"falcon:thresh=1":          `mode falcon: unknown setting "thresh": want one of cpus, threshold, interval, policy, always-on, guard-timeout, drain-timeout, order, devices, split, fastpath, sender-rps, split-cpus, split-proto, host-nics, batch, elephant, allow-reorder`,
		"mflow:batch=0":            `mode mflow: batch=0: "0": want 1..1048576 packets (without micro-flows, use mode falcon+split)`,
		"mflow:elephant=fast":      `want a rate in bit/s such as 500M or 2G`,
		"mflow:elephant=-1M":       `want a rate in bit/s`,
		"rps:split=true":           `mode rps: unknown setting "split": want one of devices, container-level, rps-cpus`,
		"falcon:threshold=101":     "mode falcon: threshold=101: 101: outside 0..100",
		"falcon:threshold=hot":     `mode falcon: threshold=hot: "hot": want a percentage 0..100`,
		"falcon:interval=20s":      "mode falcon: interval=20s: 20s: want 1ms..10s",
		"falcon:guard-timeout=-1s": "mode falcon: guard-timeout=-1s: -1s: want 1ms..1m0s",
		"falcon:policy=greedy":     `mode falcon: policy=greedy: "greedy": want adaptive, paper or static`,
		"falcon:cpus=3-1":          `mode falcon: cpus=3-1: bad CPU list "3-1"`,
		"falcon:order=random":      `want guarded or per-packet`,
		"falcon:split=maybe":       `mode falcon: split=maybe: "maybe": want true or false`,
		"falcon:split-proto=sctp":  `mode falcon: split-proto=sctp: "sctp": want tcp, udp or all`,
		"rfs:flow-entries=0":       "0 would switch RFS off",
		"falcon:90":                `mode falcon: "90": want key=value`,
		"falcon:":                  "mode falcon: no settings after ':'",
	} {
		o := DefaultOptions()
		err := ParseMode(spec, &o)
		if _, ok := err.(*SettingError); !ok || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseMode(%q): %v; want a SettingError saying %q", spec, err, msg)
		}
	}
}

// TestFlags: the flags and the mode's keys are the same settings; flags
// given win over the mode's, empty ones mean the default, and Args writes
// the options back so that the agent enable starts gets the same.
func TestFlags(t *testing.T) {
	parse := func(args ...string) (Options, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.Options()
	}
	o, err := parse("--mode", "falcon+split:threshold=70", "--threshold", "60", "--cpus=", "--order", "per-packet", "--devices", "vx0,eth1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode != ModeFalcon || !o.Split || o.Threshold != 60 || o.CPUs != nil || !o.PerPacket || !reflect.DeepEqual(o.Devices, []string{"vx0", "eth1"}) {
		t.Errorf("options %+v", o)
	}
	again, err := parse(Args(o)...)
	if err != nil || !SameSettings(o, again) {
		t.Errorf("Args %q: %+v, %v; want %+v", Args(o), again, err, o)
	}
	if o, err := parse("--mode", "rps+", "--container-level=false", "--split="); err != nil || o.Mode != ModeRPS || o.ContainerLevel || o.Split {
		t.Errorf("rps+ --container-level=false: %+v, %v", o, err)
	}
	for args, msg := range map[string]string{
		"--threshold 101":  "--threshold 101: outside 0..100",
		"--cpus 1-":        `--cpus bad CPU list "1-"`,
		"--mode vanilla":   `unknown mode "vanilla"`,
		"--mode falcon:x=": `unknown setting "x"`,
	} {
		_, err := parse(strings.Fields(args)...)
		if _, ok := err.(*SettingError); !ok || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v; want a SettingError saying %q", args, err, msg)
		}
	}
	def := DefaultOptions()
	def.Fastpath, def.FastpathAuto = true, true
	if o, err := parse(); err != nil || !SameSettings(o, def) {
		t.Errorf("no flags: %+v, %v; want the default mode's, falcon with the fast path where it fits", o, err)
	}
	if o, err := parse("--fastpath=false"); err != nil || o.Fastpath || o.FastpathAuto {
		t.Errorf("--fastpath=false: %+v, %v", o, err)
	}
	auto, err := parse("--mode", "falcon", "--fastpath=auto")
	if err != nil || !auto.Fastpath || !auto.FastpathAuto || !slices.Contains(Args(auto), "--fastpath=auto") {
		t.Errorf("--fastpath=auto: %+v, %v, args %q", auto, err, Args(auto))
	}
	if o, err := parse("--mode", "auto", "--fastpath"); err != nil || !o.Fastpath || o.FastpathAuto {
		t.Errorf("auto --fastpath: %+v, %v; want the fast path required", o, err)
	}
	if _, err := parse("--fastpath=maybe"); err == nil || !strings.Contains(err.Error(), "want true, false or auto") {
		t.Errorf("--fastpath=maybe: %v", err)
	}
}

// TestMflowOptions: micro-flows need the split, UDP needs consent to
// reordering, and their settings mean nothing elsewhere.
func TestMflowOptions(t *testing.T) {
	for spec, msg := range map[string]string{
		"mflow": "",
		"mflow:allow-reorder=true,split-proto=udp": "",
		"mflow:split-proto=udp":                    "--split-proto udp in mode mflow needs --allow-reorder",
		"mflow:split=false":                        "--batch needs --split",
		"falcon:allow-reorder=true":                "--allow-reorder needs micro-flows",
		"falcon+split:elephant=10M":                "--elephant needs micro-flows",
		"mflow:split-cpus=0,4095":                  "4095",
	} {
		o := DefaultOptions()
		if err := ParseMode(spec, &o); err != nil {
			t.Fatalf("ParseMode(%q): %v", spec, err)
		}
		o.CPUs = []int{0}
		err := o.validate()
		if msg == "" && err != nil || msg != "" && (err == nil || !strings.Contains(err.Error(), msg)) {
			t.Errorf("validate(%q) = %v; want %q", spec, err, msg)
		}
	}
	for v, want := range map[string]uint64{"0": 0, "500M": 500_000_000, "2G": 2_000_000_000, "1.5k": 1500, "100Mbit/s": 100_000_000, "7": 7} {
		got, err := parseRate(v)
		if err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", v, got, err, want)
		}
		if back, err := parseRate(formatRate(got)); err != nil || back != got {
			t.Errorf("formatRate(%d) = %q does not read back", got, formatRate(got))
		}
	}
}

// TestModeName: the catalogue's name of what a mode spec parses to.
func TestModeName(t *testing.T) {
	for spec, want := range map[string]string{
		"auto": "auto", "falcon": "falcon", "falcon+fastpath": "falcon+fastpath", "falcon+split": "falcon+split",
		"falcon+split+fastpath": "falcon+split+fastpath", "mflow": "mflow", "fastpath": "fastpath", "rps+": "rps+",
		"rfs": "rfs", "falcon:threshold=70": "falcon", "auto:split=true": "auto", "falcon:fastpath=auto": "auto",
	} {
		o := DefaultOptions()
		if err := ParseMode(spec, &o); err != nil {
			t.Fatal(err)
		}
		if got := ModeName(o); got != want {
			t.Errorf("ModeName(%s) = %s, want %s", spec, got, want)
		}
	}
}
