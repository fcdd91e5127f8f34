package schema

import "time"

// The overload search's method (bench's overload-latency workloads), as
// its table states it: steps of OverloadStepTime, a step passing with at most
// OverloadMaxLossPct lost (or retransmitted), bisection to within
// OverloadPrecision of the rate.
const (
	OverloadStepTime   = time.Second
	OverloadMaxLossPct = 0.1
	OverloadPrecision  = 0.05
)

// OverloadSearch is how a run of overload-latency found its rate.
type OverloadSearch struct {
	// MaxLossPct: a step passed with at most this share of its datagrams
	// lost.
	MaxLossPct float64 `json:"max_loss_pct"`
	// StepS is each step's length as sockperf was asked for it (-t).
	StepS float64        `json:"step_s"`
	Steps []OverloadStep `json:"steps"`
	// RatePPS is the highest rate that passed, messages/s: where the
	// window measured the latency.
	RatePPS float64 `json:"rate_pps"`
	// SenderLimited: the receiver kept up with everything the sender could
	// send, so RatePPS is the sender's limit and the receiver was not
	// overloaded.
	SenderLimited bool `json:"sender_limited,omitempty"`
}

// OverloadStep is one step of the search.
type OverloadStep struct {
	// Mode is sockperf's: "throughput" for the flat-out step, else
	// "under-load" at TargetPPS (--mps).
	Mode      string  `json:"mode"`
	TargetPPS float64 `json:"target_pps,omitempty"`
	// SentPPS is the rate sockperf reports it sent at.
	SentPPS float64 `json:"sent_pps"`
	// Sent and Received are the sending container's Udp OutDatagrams and
	// the receiving one's Udp InDatagrams over the step (TCP: Tcp OutSegs
	// and InSegs, the latter after GRO, and Retransmitted RetransSegs);
	// RcvbufErrors the receiving socket's overflows among those lost,
	// SoftnetDropped the backlog drops on every CPU. LossPct is the
	// datagrams lost, or the segments retransmitted.
	Sent           int64   `json:"sent"`
	Received       int64   `json:"received"`
	Retransmitted  int64   `json:"retransmitted,omitempty"`
	LossPct        float64 `json:"loss_pct"`
	RcvbufErrors   int64   `json:"rcvbuf_errors"`
	SoftnetDropped uint64  `json:"softnet_dropped"`
	// P50Us and P99Us are sockperf's one-way latency of the step
	// (under-load steps; the flat-out step measures none).
	P50Us float64 `json:"p50_us,omitempty"`
	P99Us float64 `json:"p99_us,omitempty"`
	Pass  bool    `json:"pass"`
}

// HotspotRun is a hotspot run's time series. Times are seconds since the
// run's traffic was found flowing (Run.Started); the window ran from
// WindowStartS to WindowEndS.
type HotspotRun struct {
	// Protocol is UDP or TCP (hotspot-tcp); files from before hotspot-tcp
	// have none, and are UDP.
	Protocol     string  `json:"protocol,omitempty"`
	IntervalS    float64 `json:"interval_s"`
	WindowStartS float64 `json:"window_start_s"`
	WindowEndS   float64 `json:"window_end_s"`
	// LightEndS is when flow 0's light client exited, HeavyAtS when its
	// heavy one started.
	LightEndS float64      `json:"light_end_s"`
	HeavyAtS  float64      `json:"heavy_at_s"`
	Flows     []FlowSeries `json:"flows"`
}

// FlowSeries is one flow's received rate, interval by interval.
type FlowSeries struct {
	Flow     int    `json:"flow"`
	Endpoint string `json:"endpoint"`
	// Heavy: the flow that turned heavy (flow 0).
	Heavy  bool          `json:"heavy,omitempty"`
	Points []SeriesPoint `json:"points"`
	// Before and After are the flow's mean received rate over the
	// window's intervals before the switch and after it; in datagrams/s
	// for UDP only (TCP has Gbit/s alone).
	BeforePPS  float64 `json:"before_pps,omitempty"`
	AfterPPS   float64 `json:"after_pps,omitempty"`
	BeforeGbps float64 `json:"before_gbps"`
	AfterGbps  float64 `json:"after_gbps"`
}

// SeriesPoint is one reporting interval of a flow.
type SeriesPoint struct {
	T    float64 `json:"t"` // the interval's end
	Gbps float64 `json:"gbps"`
	// PPS: datagrams/s, UDP only (absent for TCP, whose server reports
	// bytes).
	PPS     float64 `json:"pps,omitempty"`
	LostPct float64 `json:"lost_pct"`
	Heavy   bool    `json:"heavy,omitempty"` // the heavy client's interval
}

// InWindow says whether a point's interval lies in the window.
func (h *HotspotRun) InWindow(p SeriesPoint) bool {
	return p.T-h.IntervalS >= h.WindowStartS && p.T <= h.WindowEndS
}

// WindowGbps is what the flows received together over the window: the sum
// of each flow's mean over its intervals in the window (hotspot-tcp's
// Run.Gbps; the switch's gap, tens of milliseconds without an interval,
// does not count).
func (h *HotspotRun) WindowGbps() float64 {
	var sum float64
	for _, f := range h.Flows {
		var g float64
		var n int
		for _, p := range f.Points {
			if h.InWindow(p) {
				g, n = g+p.Gbps, n+1
			}
		}
		if n > 0 {
			sum += g / float64(n)
		}
	}
	return sum
}

// Offered is the rate a case's sender was held to (the rates workloads,
// and the hotspots' light flows): as given, and as iperf3 was asked for it.
type Offered struct {
	Spec string `json:"spec"` // "1G", "400Kpps"
	// BitsPerSecond is iperf3's -b: payload bit/s of each flow
	// (hotspot-tcp: a packet rate in full segments, hotspotRate).
	BitsPerSecond float64 `json:"bits_per_second"`
	// PacketsPerSecond is the datagrams/s that is at the case's size
	// (writes/s for TCP).
	PacketsPerSecond float64 `json:"packets_per_second"`
}
