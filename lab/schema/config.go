package schema

import (
	"encoding/json"
	"time"
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
	// MaxStealPct: a run during which any CPU lost more than this share
	// to the hypervisor (steal) is measured again (--max-steal; 0: off).
	MaxStealPct float64 `json:"max_steal_pct,omitempty"`
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
	// (CalibrateFormat), what falcon-lab sim checks before reading one.
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
	// mode's default). lab/bench/placement.go says why.
	NICCPU     *int  `json:"nic_cpu,omitempty"`
	FalconCPUs []int `json:"falcon_cpus,omitempty"`

	// ClientHostRPS is where the sending host's own receive work (ACKs,
	// replies) runs (--client-host-rps): "" on the sender CPUs, by RPS of
	// its wire, as on a client's own machine; ClientHostRPSOff where the
	// kernel runs it, the CPU that polls that wire.
	ClientHostRPS string `json:"client_host_rps,omitempty"`

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

// Senders: the tools' own clients (iperf3, sockperf), or falcon's kernel
// sender, which costs the receiving machine about what a remote host
// would (lab/xdpsend).
const (
	SenderTools  = "tools"
	SenderKernel = "kernel"
)

// ClientHostRPSOff is Config.ClientHostRPS without the sending host's RPS.
const ClientHostRPSOff = "off"
