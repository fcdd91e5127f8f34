// Package schema is the results file of falcon-lab bench: what a run measured
// (File, Result, Run and the records of each workload), the metrics a run
// yields (Metrics) and their summaries against a baseline (Normalize). bench
// writes it; sim, report and tests read it, without the bench that made it.
package schema

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/stats"
)

// Format is the results file's format version; readers reject newer majors.
const Format = 1

// File is a results file: everything needed to re-plot without re-running.
type File struct {
	Format        int       `json:"format"`
	FalconVersion string    `json:"falcon_version"`
	Started       time.Time `json:"started"`
	Finished      time.Time `json:"finished"`
	Command       string    `json:"command"`
	Interrupted   bool      `json:"interrupted,omitempty"`
	Partial       bool      `json:"partial,omitempty"` // a checkpoint: more testbeds were to come
	Machine       Machine   `json:"machine"`
	Config        Config    `json:"config"`
	Notes         []string  `json:"notes,omitempty"` // skipped combinations, …
	Results       []Result  `json:"results"`
}

// Result is one case (layout, mode, workload, size, flows) with its runs.
type Result struct {
	Layout   string `json:"layout"`
	Mode     string `json:"mode"`
	Workload string `json:"workload"`
	Size     int    `json:"size"`
	Flows    int    `json:"flows"`
	Clients  int    `json:"clients,omitempty"` // udp-stress senders
	Rate     int    `json:"rate,omitempty"`    // latency-load(-tcp) messages/s
	// Offered is the rate each flow's sender was held to: the rates
	// workloads' case rate, hotspot's light rate.
	Offered *Offered `json:"offered,omitempty"`
	// Testbed is the name of the testbed the case ran on (a new one per
	// layout × mode); Endpoints are who sent to whom, pinned where:
	// "fb-…-h1 10.10.0.1 (CPU 0) -> fb-…-h2 10.10.0.2 (CPU 1)", one per
	// client.
	Testbed   string   `json:"testbed"`
	Endpoints []string `json:"endpoints,omitempty"`
	Runs      []Run    `json:"runs"`
	Errors    []string `json:"errors,omitempty"` // failed runs, or why the case could not run
	// Summary holds every metric of Metrics(run) over the runs.
	Summary map[string]stats.Summary `json:"summary"`
	// Normalized holds the headline metrics divided by Baseline's. Paired:
	// each run was divided by the baseline's run of the same round
	// (--interleave) and Normalized summarises those ratios; otherwise it
	// is mean over mean, errors propagated.
	Baseline   string                   `json:"baseline,omitempty"`
	Normalized map[string]stats.Summary `json:"normalized,omitempty"`
	Paired     bool                     `json:"paired,omitempty"`
}

// Run is one measurement window.
type Run struct {
	Started time.Time `json:"started"`
	// Round is the run's number among its case's runs (1..); with
	// --interleave, run k of every mode of a layout ran in round k, and
	// ratios pair them.
	Round   int     `json:"round,omitempty"`
	WindowS float64 `json:"window_s"` // measured length of the window
	// PPS is packets (datagrams, TCP segments or round trips) per second
	// received by the server side's applications; Gbps is their payload rate.
	PPS     float64 `json:"pps"`
	Gbps    float64 `json:"gbps"`
	LossPct float64 `json:"loss_pct"`
	// OutOfOrder: iperf3's count for UDP, TcpExt TCPOFOQueue for TCP.
	OutOfOrder  *int64 `json:"out_of_order,omitempty"`
	Retransmits *int64 `json:"retransmits,omitempty"`
	// SetupRetries: iperf3 UDP clients started again because the datagram
	// that sets up their stream was lost (workload.ErrUDPSetupLost).
	SetupRetries int `json:"setup_retries,omitempty"`
	// StealRepeats: measurements of this run discarded before it because
	// the hypervisor took more than --max-steal of a CPU; StealPct is the
	// largest steal of any CPU in the kept one.
	StealRepeats int     `json:"steal_repeats,omitempty"`
	StealPct     float64 `json:"steal_pct,omitempty"`
	// ReassemblyWaitS is how long the run waited before it began for IP
	// fragment reassembly to drop what earlier runs left (probes.AwaitReassembly).
	ReassemblyWaitS float64 `json:"reassembly_wait_s,omitempty"`
	// Reordering is what reordering cost TCP over the window (TCP
	// workloads; files from before it have none).
	Reordering *TCPReorder `json:"reordering,omitempty"`
	Latency    *Latency    `json:"latency,omitempty"`
	// CPU is what each CPU did during the window: usage in percent
	// (usr, sys, soft, irq, idle, …) and counts (net_rx softirqs, RES IPIs,
	// softnet drops, time_squeeze, received_rps).
	CPU map[int]procfs.CPUWindow `json:"cpu"`
	// BusyPct is each CPU's busy share of the window by the clock (cpuBusy):
	// exact where CPU's split, sampled at each tick, is not.
	BusyPct map[int]float64 `json:"busy_pct,omitempty"`
	// Counters are SNMP/netstat deltas over the window, keyed
	// "rx.Udp.InDatagrams", "tx.Udp.OutDatagrams", …; the Udp ones count
	// IPv4 and IPv6 (snmp6's Udp6) together.
	Counters map[string]int64 `json:"counters,omitempty"`
	// BPF is each falcon program's work over the window (--bpf-stats), by
	// program name: falcon_steer (tc hooks), falcon_split (XDP) and the
	// guard's falcon_arrive, falcon_guard_poll and falcon_guard_drop.
	BPF map[string]BPFCost `json:"bpf,omitempty"`
	// Falcon is what falcon's agent did during the window (falcon modes):
	// whether its decisions fell inside the window or before it.
	Falcon *FalconActivity `json:"falcon,omitempty"`
	// FastPath is the fast path's packet counters over the window, both
	// hosts summed, by datapath.FastCounters' names: each packet it looked
	// at (a GRO aggregate once) is a hit, a miss or one slow reason.
	FastPath map[string]uint64 `json:"fastpath,omitempty"`
	// Stages is what each receive stage of the receiving host cost per CPU
	// over the window (--stage-cost).
	Stages []StageCost `json:"stages,omitempty"`
	// Tool is every client's parsed result as the tool reported it.
	Tool []json.RawMessage `json:"tool,omitempty"`
	// Overload is how overload-latency found the rate it measured at.
	Overload *OverloadSearch `json:"overload,omitempty"`
	// Hotspot is hotspot's time series of each flow's received rate.
	Hotspot *HotspotRun `json:"hotspot,omitempty"`
}

// TCPReorder is what reordering cost a TCP run over the window, from the
// kernel's counters of the receiving ("rx") and sending ("tx") applications'
// namespaces, in the client-to-server direction (the one the receiving
// host's modes act on; for the request/response workloads, the requests).
// Segments are skbs as TCP got them, after GRO.
type TCPReorder struct {
	// InSegs is the receiver's Tcp InSegs, what OFOQueue is a share of.
	InSegs int64 `json:"in_segs"`
	// OFOQueue (TcpExt TCPOFOQueue) is the segments the receiver put in
	// its out-of-order queue: arrived after a hole; OFODrop
	// (TCPOFODrop) those it dropped there for want of receive buffer;
	// OFOMerge (TCPOFOMerge) those whose data the queue already held, a
	// retransmission of what was only late.
	OFOQueue int64 `json:"ofo_queue"`
	OFODrop  int64 `json:"ofo_drop"`
	OFOMerge int64 `json:"ofo_merge"`
	// SACKReorder and TSReorder (TcpExt TCPSACKReorder, TCPTSReorder) are
	// the times the sender found a segment it thought lost had only been
	// reordered, by SACK or by timestamps.
	SACKReorder int64 `json:"sack_reorder"`
	TSReorder   int64 `json:"ts_reorder"`
	// DSACKRecv (TcpExt TCPDSACKRecv) is the duplicate SACKs the sender
	// got for data below the cumulative ACK, DSACKOfoRecv
	// (TCPDSACKOfoRecv) those for out-of-order data: retransmissions the
	// receiver had not needed.
	// DSACKRecvSegs (TCPDSACKRecvSegs; 0 on kernels without it) is the
	// segments all of them covered.
	DSACKRecv     int64 `json:"dsack_recv"`
	DSACKOfoRecv  int64 `json:"dsack_ofo_recv"`
	DSACKRecvSegs int64 `json:"dsack_recv_segs"`
	// SpuriousRTOs (TcpExt TCPSpuriousRTOs) is the retransmission
	// timeouts F-RTO found spurious; LostRetrans (TCPLostRetransmit) the
	// retransmissions lost again; Retrans (Tcp RetransSegs) every
	// segment the sender retransmitted.
	SpuriousRTOs int64 `json:"spurious_rtos"`
	LostRetrans  int64 `json:"lost_retrans"`
	Retrans      int64 `json:"retrans"`
	// Order is what the servers' devices saw (--order-check), nil
	// without it.
	Order *TCPOrder `json:"order,omitempty"`
	//
	// The sender's own reordering estimate (tcp_info's tcpi_reordering,
	// and tcpi_reord_seen) is not read: iperf3 3.12's JSON carries
	// neither (its stream objects stop at retransmits, cwnd, rtt and
	// pmtu), and reading the socket (ss -ti in the sender's namespace)
	// would give the estimate at one instant, not a count over the window.
}

// TCPOrder is the exact count of reordering over the window: every TCP
// data segment over IPv4 that reached a server's device (the last before
// its socket), numbered by its IP ID as its sender transmitted it
// (retransmissions get new IDs), and those of them that came after one
// transmitted later. A loss leaves a gap in the IDs, no inversion.
type TCPOrder struct {
	Segments  int64 `json:"segments"`
	Reordered int64 `json:"reordered"`
}

// FalconActivity is falcon's state over a window: the shares of it with
// the programs on the path and with steering engaged, how often it came
// back and stood down (the engagement test switches four times), and the
// engagement tests that ended in it, and those for steering; the tests
// begun, and those that ended without a verdict for too little traffic.
type FalconActivity struct {
	OnPathPct   float64 `json:"on_path_pct"`
	EngagedPct  float64 `json:"engaged_pct"`
	Comebacks   uint64  `json:"comebacks"`
	StandDowns  uint64  `json:"stand_downs"`
	Tests       uint64  `json:"engagement_tests"`
	ForSteering uint64  `json:"tests_for_steering"`
	// Probes and Thin are nil in files from before falcon counted them:
	// unknown, not none.
	Probes *uint64 `json:"tests_begun,omitempty"`
	Thin   *uint64 `json:"tests_thin,omitempty"`
	// Causes: the decision by cause over the window, each turn's inputs
	// and verdict with it (Trace), to replay offline (File.CauseTraces).
	Causes *CauseActivity `json:"causes,omitempty"`
}

// BPFCost is one program's runs and run time over a window, summed over
// its attachments.
type BPFCost struct {
	Runs     uint64  `json:"runs"`
	TimeNs   uint64  `json:"time_ns"`
	NsPerRun float64 `json:"ns_per_run"`
}

// Latency in microseconds.
type Latency struct {
	AvgUs  float64 `json:"avg_us"`
	P50Us  float64 `json:"p50_us"`
	P90Us  float64 `json:"p90_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
}

// WriteFile writes f as indented JSON, atomically (a reader never sees half
// a file, and an interrupted write keeps the previous one).
func WriteFile(path string, f *File) error {
	return fileutil.WriteJSON(path, f, 0o644)
}

// ReadFile reads a results file.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Decode reads the contents of a results file.
func Decode(b []byte) (*File, error) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a falcon results file: %v", err)
	}
	if f.Format > Format {
		return nil, fmt.Errorf("results format %d is newer than this falcon reads (%d)", f.Format, Format)
	}
	if f.Results == nil {
		return nil, fmt.Errorf("not a falcon results file (no \"results\")")
	}
	return &f, nil
}

// StageCost is the NET_RX softirq time one receive stage of the receiving
// host cost on one CPU over a window (--stage-cost), and the skbs and
// segments the stage delivered there (lab/stagetrace, StartCost).
type StageCost struct {
	// Stage: "nic" (the receiving host's wire device), "vxlan" (its VXLAN
	// device), "container" (the receiving containers' eth0), "backlog"
	// (backlog polls before their first skb), "other" (NET_RX time outside
	// every poll), or any other device of the receiving host's namespaces
	// by its name.
	Stage string `json:"stage"`
	CPU   int    `json:"cpu"`
	Ns    uint64 `json:"ns"`
	SKBs  uint64 `json:"skbs"`
	Segs  uint64 `json:"segs"`
	// UntimedSegs of Segs were delivered outside a NET_RX softirq (a
	// threaded NAPI with --nic-cpu): their time is in no Ns.
	UntimedSegs uint64 `json:"untimed_segs,omitempty"`
}
