// Package bench runs falcon's benchmark matrix — layout × mode × workload ×
// message size × flow count, several runs each — on fresh testbeds, records
// per-run figures and per-CPU counters, and summarises them (mean, 95 %
// Student-t interval, normalised to a baseline) into one results file that
// holds everything needed to re-plot.
package bench

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/lab/testbed"
)

// Config is everything a bench run was asked to do. It is written into the
// results file as given after presets and defaults were applied, so a file
// says exactly how it was made.
type Config struct {
	Preset       string   `json:"preset,omitempty"`
	Layouts      []string `json:"layouts"`
	Modes        []string `json:"modes"`
	Workloads    []string `json:"workloads"` // "name" or "name:size"
	Sizes        []int    `json:"sizes"`
	Duration     Duration `json:"duration"`
	Warmup       Duration `json:"warmup"`
	Runs         int      `json:"runs"`
	Flows        []int    `json:"flows"`   // multi-flow workloads only
	Clients      int      `json:"clients"` // udp-stress senders
	SenderCPUs   []int    `json:"sender_cpus"`
	ReceiverCPUs []int    `json:"receiver_cpus"`
	Rate         int      `json:"rate"` // latency-load(-tcp) messages/s
	// Rates are the rates workloads' rates (--rates), HotspotRate
	// hotspot's light rate (--hotspot-rate); each is kept only where a
	// workload runs at it.
	Rates       []string `json:"rates,omitempty"`
	HotspotRate string   `json:"hotspot_rate,omitempty"`
	// Sender is what sends: the tools' clients (SenderTools), or the
	// kernel sender on the sending host's wire (SenderKernel).
	Sender     string `json:"sender,omitempty"`
	Containers int    `json:"containers"`
	Baseline   string `json:"baseline"` // "auto" or "layout/mode"
	JSON       string `json:"json,omitempty"`
	Quiet      bool   `json:"quiet"`
	// BPFStats turns the kernel's BPF run-time statistics on for the whole
	// bench and records each falcon program's runs and time per run. Off by
	// default: the kernel then reads the clock twice around every program
	// run, which the figures of the falcon modes would pay for.
	BPFStats bool `json:"bpf_stats,omitempty"`
	// StageCost times each receive stage of the receiving host in NET_RX
	// softirqs, per CPU, over every window (Run.Stages). Off by default:
	// its tracepoints cost every packet a few BPF runs.
	StageCost bool `json:"stage_cost,omitempty"`
	// OrderCheck counts, per run of a TCP workload, the data segments
	// that reached the servers' devices after one sent later
	// (Run.Reordering.Order). Off by default: its tracepoint costs every
	// packet a BPF run.
	OrderCheck bool `json:"order_check,omitempty"`
	// Calibrate is the calibration format of a calibrate preset's run
	// (CalibrateFormat), what falcon sim checks before reading one.
	Calibrate int `json:"calibrate,omitempty"`
	// Interleave alternates the modes of a layout run by run on one
	// testbed, and pairs each ratio with the baseline's run of the same
	// round (sessions.go says why).
	Interleave bool `json:"interleave,omitempty"`

	// ContainersPerFlow ("--containers flows") gives each flow count a
	// testbed of its own with that many containers per host, one client and
	// one server container per flow, as the Kubernetes RPS/RFS study's
	// replicas; Containers is 0 then.
	ContainersPerFlow bool `json:"containers_per_flow,omitempty"`

	// NICCPU runs the receiving host's NIC poll (--nic-cpu; nil: it runs
	// where the senders transmit); FalconCPUs is the set falcon and rps
	// modes get unless their spec names one (--falcon-cpus; nil: the
	// mode's default). placement.go says why.
	NICCPU     *int  `json:"nic_cpu,omitempty"`
	FalconCPUs []int `json:"falcon_cpus,omitempty"`

	// IPv6 builds every testbed over IPv6 only (--ipv6).
	IPv6 bool `json:"ipv6,omitempty"`

	// Quick is a smoke test (--quick): one short run per case, long
	// sweeps of sizes and flow counts cut to three values.
	Quick bool `json:"quick,omitempty"`
}

// Duration is a time.Duration that reads and writes as "4s" in JSON.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// ConfigError is a problem with the command line, reported before anything
// is created (the command exits 2).
type ConfigError struct {
	Msg string
	// NeedCPUs is set when the command line is fine but this machine has
	// too few CPUs for it (the scale preset): the fewest it needs.
	NeedCPUs int
}

func (e *ConfigError) Error() string { return e.Msg }

func configErrorf(format string, a ...any) error { return &ConfigError{Msg: fmt.Sprintf(format, a...)} }

// Layouts are the testbed layouts bench can run on.
var Layouts = testbed.Layouts

// Size limits. The papers sweep 16 B .. 64 KiB; UDP payloads (and sockperf
// messages) stop at 65507 (65535 − IPv4 and UDP headers), while TCP writes
// may be larger: the Kubernetes study wrote 128 KiB.
const (
	MinSize    = 16
	MaxSize    = 1 << 20
	MaxUDPSize = 65507
)

// ParseSize reads a message size: "16", "1400", "4K", "4KiB", "64k", "1M",
// and FormatSize's "16 B", "4 KiB". K and M are binary (1024) multiples, as
// the papers' "64 KB" means.
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	mult := 1
	switch {
	case strings.HasSuffix(t, "K"), strings.HasSuffix(t, "k"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"), strings.HasSuffix(t, "m"):
		mult, t = 1<<20, t[:len(t)-1]
	}
	n, err := strconv.Atoi(strings.TrimSpace(t)) // a space may part number and unit
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (want bytes, e.g. 16, 1400, 4K, 64K)", s)
	}
	if n > MaxSize/mult { // before multiplying: a wrapped product may land in range
		return 0, fmt.Errorf("size %q out of range: %d B .. %s", s, MinSize, FormatSize(MaxSize))
	}
	n *= mult
	if n < MinSize {
		return 0, fmt.Errorf("size %q out of range: %d B .. %s", s, MinSize, FormatSize(MaxSize))
	}
	return n, nil
}

// FormatSize writes a size the way ParseSize reads it: "16 B", "4 KiB".
func FormatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = appendUnique(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes given")
	}
	return out, nil
}

func parseInts(s string, min int) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < min {
			return nil, fmt.Errorf("bad number %q (want an integer ≥ %d)", f, min)
		}
		out = appendUnique(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func appendUnique[T comparable](list []T, v T) []T {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}
