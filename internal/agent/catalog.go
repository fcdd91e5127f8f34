package agent

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/quote"
)

// The mode catalogue: every mode falcon knows, by the name that enable
// --mode, agent --mode, bench --modes and the results files use. A mode is
// an implementation (the code that changes the overlay) with some of its
// settings fixed: "falcon+split" is the falcon implementation with
// split=true. Adding a mode is one entry here, plus its implementation
// when it needs new code.
var catalogue = []catalogueEntry{
	{DefaultMode, ModeFalcon, "fastpath=" + FastpathAuto, "the default: the cached fast path wherever its checks pass, and falcon's steering on top where it pays"},
	{"falcon", ModeFalcon, "", "steer each stage with BPF to a CPU chosen by load"},
	{"falcon+split", ModeFalcon, "split=true", "falcon, and split the NIC stage off the interrupt CPU (XDP + cpumap)"},
	{"fastpath", ModeFastpath, "", "the cached fast path: a flow the overlay has carried skips its devices (VXLAN, bridge or routing, netfilter, veth backlog)"},
	{"falcon+fastpath", ModeFalcon, "fastpath=true", "falcon, and the cached fast path beside it"},
	{"falcon+split+fastpath", ModeFalcon, "split=true,fastpath=true", "falcon+split, and the cached fast path beside it"},
	{"mflow", ModeFalcon, "split=true,batch=256,policy=paper", "MFLOW: split each elephant flow into micro-flows of 256 packets over the split CPUs (TCP; UDP with allow-reorder)"},
	{"rps", ModeRPS, "", "the Kubernetes RPS/RFS study's RPS: rps_cpus on the host's overlay devices"},
	{"rps+", ModeRPS, "container-level=true", "RPS, also on the containers' eth0"},
	{"rfs", ModeRFS, "", "the study's RFS: rps_sock_flow_entries and rps_flow_cnt"},
	{"rfs+", ModeRFS, "container-level=true", "RFS, also on the containers' eth0"},
}

type catalogueEntry struct {
	name     string // what users write
	impl     string // the implementation, Options.Mode
	settings string // the settings it fixes, key=value,…
	summary  string
}

// ModeFalcon is the default implementation: BPF steering of each stage.
const ModeFalcon = "falcon"

// DefaultMode is the mode of an enable or agent that names none: falcon
// with fastpath=auto (FastpathAuto).
const DefaultMode = "auto"

// FastpathAuto is the fastpath setting's third value: the fast path where
// its checks pass, steering alone where they do not.
const FastpathAuto = "auto"

// The implementations: the code behind the catalogue's modes.
var implementations = map[string]implementation{
	ModeFalcon: {
		new:    func() Mode { return &falconMode{} },
		what:   "falcon to steer",
		steers: true,
		preflight: func(o Options) error {
			if o.Fastpath && !o.FastpathAuto {
				if err := datapath.FastPathSupported(); err != nil {
					return err
				}
			}
			if o.Split {
				return datapath.SplitSupported()
			}
			return datapath.Supported()
		},
	},
	ModeFastpath: {
		new:       func() Mode { return &fastMode{} },
		what:      "a fast path to cache",
		preflight: func(Options) error { return datapath.FastPathSupported() },
	},
	ModeRPS: {new: func() Mode { return &rpsMode{} }, what: "RPS/RFS on it"},
	ModeRFS: {
		new:  func() Mode { return &rpsMode{rfs: true} },
		what: "RPS/RFS on it",
		preflight: func(Options) error {
			if _, err := os.Stat(SockFlowPath); err != nil {
				return fmt.Errorf("RFS needs %s, which only the initial network namespace has: %w", SockFlowPath, err)
			}
			return nil
		},
	},
}

type implementation struct {
	new       func() Mode           // a fresh Mode for one agent
	what      string                // "falcon to steer": what a layout without an overlay lacks
	preflight func(o Options) error // can this kernel run it at all (nil: yes)
	steers    bool                  // it pins the steering's maps (config, load, counters)
}

// Mode is what an agent does to an overlay. The agent owns discovery, the
// journal, the state files and the lifecycle; a mode only turns overlays
// into changes.
type Mode interface {
	// Check validates what the mode needs (kernel features, options,
	// the overlay found) without changing the system.
	Check(h *Host, o *discover.Overlay) error
	// Start sets the mode up for overlay o; anything it changes must go
	// through h.Apply (sysfs/procfs values) or be recorded with h.AddHooks
	// before it is made, so that Disable can undo it after a crash.
	Start(h *Host, o *discover.Overlay) error
	// Update follows a changed overlay (containers came or went). It is
	// called from one goroutine, never concurrently with Start or Stop.
	Update(h *Host, o *discover.Overlay) error
	// Ready reports whether the mode is fully working (for status --ready).
	Ready() bool
	// Stop undoes what Start and Update did, except the journaled values,
	// which the agent restores after Stop.
	Stop(h *Host) error
}

func lookupMode(impl string) (implementation, bool) {
	m, ok := implementations[impl]
	return m, ok
}

// implNames lists the implementations, sorted.
func implNames() []string {
	var out []string
	for n := range implementations {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ModeNames lists the catalogue's modes, sorted.
func ModeNames() []string {
	var out []string
	for _, e := range catalogue {
		out = append(out, e.name)
	}
	sort.Strings(out)
	return out
}

// ModeHelp describes the catalogue for usage texts, one mode a line.
func ModeHelp() string {
	var b strings.Builder
	for _, e := range catalogue {
		fmt.Fprintf(&b, "  %-13s %s\n", e.name, e.summary)
	}
	return b.String()
}

// ParseMode reads a mode spec, name[:key=value,…] — "falcon",
// "falcon+split", "falcon:threshold=90,cpus=2-5" — onto o: the
// implementation, the settings the mode fixes, then the settings given,
// each checked as its flag would be. A value may hold commas (cpus=0-1,4):
// a part without '=' continues the value before it. Errors are
// *SettingError.
func ParseMode(spec string, o *Options) error {
	name, rest, hasSettings := strings.Cut(strings.TrimSpace(spec), ":")
	i := slices.IndexFunc(catalogue, func(e catalogueEntry) bool { return e.name == name })
	if i < 0 {
		return settingErrorf("unknown mode %s: want one of %s", quote.Short(name), strings.Join(ModeNames(), ", "))
	}
	e := catalogue[i]
	o.Mode = e.impl
	for _, kv := range append(splitSettings(e.settings), splitSettings(rest)...) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return settingErrorf("mode %s: %s: want key=value", name, quote.Short(kv))
		}
		s := lookupSetting(k, e.impl)
		if s == nil {
			return settingErrorf("mode %s: unknown setting %s: want one of %s", name, quote.Short(k), strings.Join(settingNames(e.impl), ", "))
		}
		if err := s.apply(o, v); err != nil {
			return settingErrorf("mode %s: %s=%s: %v", name, k, quote.Prefix(v), err)
		}
	}
	if hasSettings && rest == "" {
		return settingErrorf("mode %s: no settings after ':'", name)
	}
	return nil
}

// splitSettings splits "a=1,b=0-1,4" into "a=1" and "b=0-1,4".
func splitSettings(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case !strings.Contains(p, "=") && len(out) > 0:
			out[len(out)-1] += "," + p
		default:
			out = append(out, p)
		}
	}
	return out
}

// Preflight says whether this kernel can run the mode of o at all, before
// anything is created (bench checks every mode of a run first).
func Preflight(o Options) error {
	if m, ok := lookupMode(o.Mode); ok && m.preflight != nil {
		return m.preflight(o)
	}
	return nil
}

// ModeName is the catalogue's name for o's mode: the entry of o's
// implementation that fixes the most settings, all as o has them ("auto"
// for falcon with fastpath=auto, "mflow" for its three).
func ModeName(o Options) string {
	name, fixed := o.Mode, -1
	for _, e := range catalogue {
		kvs := splitSettings(e.settings)
		if e.impl != o.Mode || len(kvs) <= fixed || !fixesAs(e, kvs, o) {
			continue
		}
		name, fixed = e.name, len(kvs)
	}
	return name
}

// fixesAs: every setting entry e fixes (kvs) is as o has it.
func fixesAs(e catalogueEntry, kvs []string, o Options) bool {
	d := DefaultOptions()
	if ParseMode(e.name, &d) != nil {
		return false
	}
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		if s := lookupSetting(k, e.impl); s == nil || s.get(&d) != s.get(&o) {
			return false
		}
	}
	return true
}

// nftTool is the one command the fast path runs; fastTools maps it to its
// Debian package.
const nftTool = "nft"

var fastTools = map[string]string{nftTool: "nftables"}

// Tools are the commands the agent of o's mode runs, each with the Debian
// package that has it: setup.sh installs those of the demo's modes
// (scripts/tools_test.go), the image carries nft.
func Tools(o Options) map[string]string {
	if o.Mode == ModeFastpath || o.Fastpath {
		return maps.Clone(fastTools)
	}
	return nil
}

// BothWays says whether the mode of o changes the sending side too, so a
// bench or a cluster runs it on every host: the fast path's egress half
// encapsulates where the packets leave.
func BothWays(o Options) bool { return o.Mode == ModeFastpath || o.Fastpath }

// NeedsOverlay says, for a mode that changes an overlay, what a layout
// without one lacks ("falcon to steer"); "" for vanilla.
func NeedsOverlay(o Options) string {
	m, ok := lookupMode(o.Mode)
	if !ok {
		return ""
	}
	return m.what
}

// SettingError is a mode spec or setting that cannot be right whatever the
// system: a usage error.
type SettingError struct{ Msg string }

func (e *SettingError) Error() string { return e.Msg }

func settingErrorf(format string, a ...any) error {
	return &SettingError{fmt.Sprintf(format, a...)}
}
