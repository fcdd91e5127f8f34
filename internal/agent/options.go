// Package agent runs falcon on one host namespace: it validates the
// settings, discovers the overlay, changes the devices' RPS settings through
// a journal, loads and attaches the BPF datapath, feeds it CPU load, follows
// containers as they come and go, and undoes all of it when it stops —
// or, after an agent was killed, when Disable runs.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/policy"
)

// Where the agents keep their state (tmpfs: it must not outlive a reboot,
// which resets everything it describes) and pin their maps.
const (
	DefaultStateRoot = "/run/falcon"
	DefaultPinRoot   = datapath.BPFFS + "/falcon"
)

// Options are the settings of one agent, grouped by the mechanism each
// drives. The groups are embedded: o.Threshold is o.SteerOptions.Threshold,
// and the state file holds them flat, as before they were grouped. The
// zero value is not valid; start from DefaultOptions.
type Options struct {
	Netns string `json:"netns"` // host namespace; "" = the current one
	Mode  string `json:"mode"`  // the implementation: falcon, rps or rfs (catalog.go)
	SteerOptions
	GuardOptions
	SplitOptions
	FastOptions
	MflowOptions
	RPSOptions
	ProcessOptions
}

// SteerOptions: which CPU each stage of a flow runs on (the falcon mode).
type SteerOptions struct {
	CPUs      []int         `json:"cpus"`                // the Falcon CPU set S; nil = all online CPUs
	Threshold int           `json:"threshold"`           // load percent 0..100
	Interval  time.Duration `json:"interval"`            // load sampling period
	Policy    string        `json:"policy"`              // a registered policy (internal/policy): adaptive, paper, static
	AlwaysOn  bool          `json:"always_on,omitempty"` // never inline for the set's average load (FALCON Fig. 15)
	PerPacket bool          `json:"per_packet"`          // --order per-packet: the paper's per-packet choice
	Devices   []string      `json:"devices"`             // nil = auto; else VXLAN devices (and a NIC) to use
}

// GuardOptions: the ordering guard, and the drain when the agent stops.
type GuardOptions struct {
	// GuardTimeout: a flow idle this long has no packet left in any queue;
	// the ordering guard stops waiting for packets lost on the way.
	GuardTimeout time.Duration `json:"guard_timeout"`
	// DrainTimeout bounds how long stopping waits for steered flows to come
	// back inline (falcon.go drain); it must end well within the
	// DaemonSet's and the unit's 60 s to stop.
	DrainTimeout time.Duration `json:"drain_timeout"`
}

// FastOptions: the cached fast path beside steering (fastpath.go).
type FastOptions struct {
	Fastpath bool `json:"fastpath,omitempty"`
	// FastpathAuto: the fast path where its checks pass (the default
	// mode): a layout or kernel it cannot serve leaves steering alone, with
	// the reason in status, instead of refusing to start.
	FastpathAuto bool `json:"fastpath_auto,omitempty"`
	// SenderRPS sets RPS on the containers' host-side veths, which keeps a
	// flow they send in order (fastpath_order.go); on by default, so
	// always written.
	SenderRPS bool `json:"sender_rps"`
}

// SplitOptions: the NIC stage split off the interrupt CPU.
type SplitOptions struct {
	// Split moves the NIC stage's skb allocation and GRO to SplitCPUs
	// (nil = CPUs) with XDP and a cpumap (split.go); SplitProto limits it
	// to inner tcp or udp ("" = all).
	Split      bool   `json:"split,omitempty"`
	SplitCPUs  []int  `json:"split_cpus,omitempty"`
	SplitProto string `json:"split_proto,omitempty"`
	// HostNICs are NICs of the host network itself whose stage the split
	// takes too, for the host's own sockets (FALCON's Host+).
	HostNICs []string `json:"host_nics,omitempty"`
}

// MflowOptions: micro-flows (mode mflow, mflow.go). Batch > 0 splits
// elephants (flows at Elephant bit/s or more) into micro-flows of Batch
// packets over the split CPUs; AllowReorder lets it split UDP flows too.
type MflowOptions struct {
	Batch        int    `json:"batch,omitempty"`
	Elephant     uint64 `json:"elephant,omitempty"`
	AllowReorder bool   `json:"allow_reorder,omitempty"`
}

// RPSOptions: the rps and rfs modes (issue 5); the falcon mode ignores
// them.
type RPSOptions struct {
	ContainerLevel bool  `json:"container_level,omitempty"`
	RPSCPUs        []int `json:"rps_cpus,omitempty"`
	FlowEntries    int   `json:"flow_entries,omitempty"`
}

// ProcessOptions shape the agent process, not the mode.
type ProcessOptions struct {
	// MetricsAddr is where the agent serves Prometheus metrics, HOST:PORT
	// ("" = nowhere); LogFormat is text (default) or json.
	MetricsAddr string `json:"metrics_addr,omitempty"`
	LogFormat   string `json:"log_format,omitempty"`

	// StateRoot and PinRoot default to DefaultStateRoot and DefaultPinRoot;
	// tests move them.
	StateRoot string `json:"-"`
	PinRoot   string `json:"-"`
	// Log receives the agent's log lines; nil = slog's default logger.
	Log *slog.Logger `json:"-"`
}

// DefaultDrainTimeout: a flow at full rate on this 2-vCPU VM pauses for
// longer than its queues take to empty only now and then; 10 s leaves 50 of
// a pod's 60 s to stop for the rest.
const DefaultDrainTimeout = 10 * time.Second

// DefaultOptions are the paper's settings on all online CPUs.
func DefaultOptions() Options {
	return Options{
		Mode:         ModeFalcon,
		SteerOptions: SteerOptions{Threshold: datapath.DefaultThreshold, Policy: datapath.PolicyAdaptive, Interval: policy.DefaultInterval},
		GuardOptions: GuardOptions{GuardTimeout: datapath.DefaultGuardTimeout, DrainTimeout: DefaultDrainTimeout},
		MflowOptions: MflowOptions{Elephant: DefaultElephant},
		FastOptions:  FastOptions{SenderRPS: true},
	}
}

func (o *Options) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.Default()
}

func (o *Options) stateRoot() string {
	if o.StateRoot != "" {
		return o.StateRoot
	}
	return DefaultStateRoot
}

func (o *Options) pinRoot() string {
	if o.PinRoot != "" {
		return o.PinRoot
	}
	return DefaultPinRoot
}

// Key names the host namespace in state and pin paths, and with them in
// the lock that lets one agent at a time run there. It names the
// namespace, not the name given for it: "" and /proc/1/ns/net, foo and
// /run/netns/foo have one key, so that a second agent is refused however
// it names the namespace: ns-DEV-INODE (netns.ID), a name no other
// directory of falcon's has (testbeds, the global lock).
func Key(ns string) (string, error) {
	id, err := netns.Identify(ns)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("ns-%d-%d", id.Dev, id.Ino), nil
}

var keyName = regexp.MustCompile(`^ns-([0-9]+)-([0-9]+)$`)

// parseKey is Key's inverse: the namespace a state or pin directory's name
// stands for.
func parseKey(key string) (netns.ID, bool) {
	m := keyName.FindStringSubmatch(key)
	if m == nil {
		return netns.ID{}, false
	}
	dev, err1 := strconv.ParseUint(m[1], 10, 64)
	ino, err2 := strconv.ParseUint(m[2], 10, 64)
	return netns.ID{Dev: dev, Ino: ino}, err1 == nil && err2 == nil
}

func (o *Options) stateDir(key string) string { return filepath.Join(o.stateRoot(), key) }
func (o *Options) pinDir(key string) string   { return filepath.Join(o.pinRoot(), key) }

// validate checks everything that can be checked without changing the
// system, and fills in defaults.
func (o *Options) validate() error {
	if o.Mode == "" {
		o.Mode = ModeFalcon
	}
	if _, ok := lookupMode(o.Mode); !ok {
		return fmt.Errorf("mode %q: want one of %s", o.Mode, strings.Join(implNames(), ", "))
	}
	if err := netns.Check(o.Netns); err != nil {
		return err
	}
	if err := checkSettings(o); err != nil {
		return err
	}
	if o.CPUs == nil {
		cpus, err := cpuset.Online()
		if err != nil {
			return fmt.Errorf("read online CPUs: %w", err)
		}
		o.CPUs = cpus
	}
	if len(o.CPUs) == 0 {
		return errors.New("empty CPU set")
	}
	if err := cpuset.Check(o.CPUs); err != nil {
		return err
	}
	if o.RPSCPUs != nil {
		if err := cpuset.Check(o.RPSCPUs); err != nil {
			return fmt.Errorf("--rps-cpus: %w", err)
		}
	}
	if err := o.validateSplit(); err != nil {
		return err
	}
	if err := o.validateMflow(); err != nil {
		return err
	}
	if o.FlowEntries < 0 {
		return fmt.Errorf("flow entries %d is negative", o.FlowEntries)
	}
	return checkModeOptions(o)
}

// sameSettings reports whether two validated option sets configure the
// same thing (an enable that changes nothing is a no-op): the same
// namespace, and the same settingsKey.
func sameSettings(a, b Options) bool {
	return sameNetns(a.Netns, b.Netns) && settingsKey(a) == settingsKey(b)
}

// settingsKey is o's settings as one value: o as its state file holds it
// (the json:"-" plumbing left out) with each CPU list in canonical order
// and empty lists as none, so that two spellings of one setting are equal
// and a new setting takes part without being named here.
func settingsKey(o Options) string {
	o.Netns = ""
	normalize(reflect.ValueOf(&o).Elem())
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // Options are plain values: only a programming error lands here
	}
	return string(b)
}

// normalize rewrites the lists of struct v (and of the groups in it) in
// their canonical form.
func normalize(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			normalize(f)
		case f.Kind() == reflect.Slice && f.Len() == 0:
			f.SetZero()
		case f.Type() == reflect.TypeFor[[]int]():
			f.Set(reflect.ValueOf(cpuset.Of(f.Interface().([]int)...)))
		}
	}
}

// sameNetns says whether two names name one namespace (Key).
func sameNetns(a, b string) bool {
	if a == b {
		return true
	}
	ka, err := Key(a)
	if err != nil {
		return false
	}
	kb, err := Key(b)
	return err == nil && ka == kb
}

// Validate checks opts as Start would, without changing anything, and fills
// in the defaults (all online CPUs, the falcon mode).
func Validate(opts *Options) error { return opts.validate() }

// SameSettings reports whether two validated option sets configure the
// same thing, so that enabling again is a no-op.
func SameSettings(a, b Options) bool { return sameSettings(a, b) }
