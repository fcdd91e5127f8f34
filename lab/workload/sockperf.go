package workload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// StartSockperfServer starts "sockperf server" on addr:port (UDP, or TCP
// when tcp) in network namespace ns, pinned to cpus when given, and returns
// once its socket is bound. addr "" listens on all addresses.
func StartSockperfServer(ctx context.Context, ns, addr string, port int, cpus []int, tcp bool) (Server, error) {
	if err := checkPort("sockperf server port", port, false); err != nil {
		return nil, err
	}
	if err := checkCommon("sockperf", ns, cpus); err != nil {
		return nil, err
	}
	args := []string{"sr", "-p", strconv.Itoa(port)}
	if addr != "" {
		args = append(args, "-i", addr)
	}
	proto := "udp"
	if tcp {
		args, proto = append(args, "--tcp"), "tcp"
	}
	s, err := startServer(ctx, "sockperf server", ns, proto, port, command(ns, cpus, "sockperf", args...))
	if err != nil {
		return nil, err
	}
	return &SockperfServer{s}, nil
}

// SockperfServer is the Server StartSockperfServer returns.
type SockperfServer struct{ *server }

// Received is the number of messages the server handled since it started,
// warm-up included, as it prints on exit; call it after Stop.
func (s *SockperfServer) Received() (int64, error) {
	return ParseSockperfServer([]byte(s.out.String()))
}

var serverTotalRE = regexp.MustCompile(`Total ([0-9]+) messages received and handled`)

// ParseSockperfServer reads the message count a sockperf server prints
// when it is interrupted.
func ParseSockperfServer(b []byte) (int64, error) {
	m := serverTotalRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("sockperf server: no message total in its output: %s", lastLines(string(stripANSI(b)), 3))
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// SockperfOpts describes one sockperf client run.
type SockperfOpts struct {
	Mode     string // "ping-pong", "under-load" or "throughput"
	Netns    string
	Addr     string
	Port     int
	Size     int           // message size, 14..65507; 0 = sockperf's default (14)
	Duration time.Duration // rounded up to whole seconds
	MPS      int           // messages per second; required for under-load, 0 = as fast as possible otherwise
	TCP      bool
	CPUs     []int
}

// SockperfResult is what the sockperf client reported over its valid
// (post-warm-up) duration. Latencies are one-way: half the round trip, as
// sockperf prints them without --full-rtt.
type SockperfResult struct {
	Mode      string  `json:"mode"`
	Duration  float64 `json:"duration"`
	Sent      int64   `json:"sent"`
	Received  int64   `json:"received"`
	MsgPerSec float64 `json:"msg_per_sec"` // sent per second (throughput: sockperf's message rate)
	Mbps      float64 `json:"mbps"`        // throughput mode only

	AvgUs    float64 `json:"avg_us"`
	StdDevUs float64 `json:"stddev_us"`
	MinUs    float64 `json:"min_us"`
	P25Us    float64 `json:"p25_us"`
	P50Us    float64 `json:"p50_us"`
	P75Us    float64 `json:"p75_us"`
	P90Us    float64 `json:"p90_us"`
	P99Us    float64 `json:"p99_us"`
	P999Us   float64 `json:"p999_us"`
	P9999Us  float64 `json:"p9999_us"`
	P99999Us float64 `json:"p99999_us"`
	MaxUs    float64 `json:"max_us"`

	Observations int64 `json:"observations"`
	Dropped      int64 `json:"dropped"`
	Duplicated   int64 `json:"duplicated"`
	OutOfOrder   int64 `json:"out_of_order"`
}

var sockperfModes = map[string]string{"ping-pong": "pp", "under-load": "ul", "throughput": "tp"}

func (o SockperfOpts) validate() error {
	if _, ok := sockperfModes[o.Mode]; !ok {
		return fmt.Errorf("sockperf: unknown mode %q (want ping-pong, under-load or throughput)", o.Mode)
	}
	if o.Addr == "" {
		return fmt.Errorf("sockperf: no server address")
	}
	if err := checkPort("sockperf port", o.Port, false); err != nil {
		return err
	}
	if o.Duration <= 0 {
		return fmt.Errorf("sockperf: duration must be positive, got %v", o.Duration)
	}
	if o.Size != 0 && (o.Size < 14 || o.Size > MaxUDPSize) {
		return fmt.Errorf("sockperf: message size %d out of range 14..%d", o.Size, MaxUDPSize)
	}
	if o.MPS < 0 || (o.Mode == "under-load" && o.MPS == 0) {
		return fmt.Errorf("sockperf: %s needs a positive message rate, got %d", o.Mode, o.MPS)
	}
	return nil
}

func (o SockperfOpts) args() []string {
	a := []string{sockperfModes[o.Mode], "-i", o.Addr, "-p", strconv.Itoa(o.Port),
		"-t", strconv.Itoa(seconds(o.Duration))}
	if o.Size > 0 {
		a = append(a, "-m", strconv.Itoa(o.Size))
	}
	if o.MPS > 0 {
		a = append(a, "--mps", strconv.Itoa(o.MPS))
	}
	if o.TCP {
		a = append(a, "--tcp")
	}
	return a
}

// RunSockperf runs one sockperf client. It is killed when ctx ends, and at
// the latest 30 s after the test should have finished.
func RunSockperf(ctx context.Context, o SockperfOpts) (SockperfResult, error) {
	if err := o.validate(); err != nil {
		return SockperfResult{}, err
	}
	// sockperf exits 0 on most failures and prints them among its results.
	res, err := runClient(ctx, client[SockperfResult]{tool: "sockperf", ns: o.Netns, cpus: o.CPUs, d: o.Duration, args: o.args(),
		parse: func(stdout, stderr []byte) (SockperfResult, error) { return ParseSockperf(append(stdout, stderr...)) },
		failed: func(stdout, stderr []byte) string {
			return lastLines(string(stripANSI(append(stdout, stderr...))), 5)
		}})
	if err != nil {
		return SockperfResult{}, err
	}
	res.Mode = o.Mode
	return res, nil
}

var (
	ansiRE       = regexp.MustCompile("\x1b\\[[0-9;]*m")
	validRE      = regexp.MustCompile(`\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=([0-9]+); ReceivedMessages=([0-9]+)`)
	avgRE        = regexp.MustCompile(`avg-latency=([0-9.]+) \(std-dev=([0-9.]+)\)`)
	dropRE       = regexp.MustCompile(`# dropped messages = ([0-9]+); # duplicated messages = ([0-9]+); # out-of-order messages = ([0-9]+)`)
	obsRE        = regexp.MustCompile(`Total ([0-9]+) observations`)
	pctRE        = regexp.MustCompile(`---> percentile ([0-9.]+) =\s*([0-9.]+)`)
	extremeRE    = regexp.MustCompile(`---> <(MAX|MIN)> observation =\s*([0-9.]+)`)
	tpTotalRE    = regexp.MustCompile(`Total of ([0-9]+) messages sent in ([0-9.]+) sec`)
	tpRateRE     = regexp.MustCompile(`Message Rate is ([0-9.]+) \[msg/sec\]`)
	tpBandRE     = regexp.MustCompile(`BandWidth is [0-9.]+ MBps \(([0-9.]+) Mbps\)`)
	sockperfErrs = []string{"ERROR", "No messages were received", "Invalid"}
)

func stripANSI(b []byte) []byte { return ansiRE.ReplaceAll(b, nil) }

// ParseSockperf reads a sockperf client's output (stdout and stderr). Mode
// is "throughput" for throughput runs and "latency" for ping-pong and
// under-load, which print the same report (RunSockperf sets the real mode).
func ParseSockperf(b []byte) (SockperfResult, error) {
	var r SockperfResult
	var latency, throughput bool
	pcts := map[string]*float64{"25.000": &r.P25Us, "50.000": &r.P50Us, "75.000": &r.P75Us,
		"90.000": &r.P90Us, "99.000": &r.P99Us, "99.900": &r.P999Us, "99.990": &r.P9999Us, "99.999": &r.P99999Us}
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	sc := bufio.NewScanner(bytes.NewReader(stripANSI(b)))
	for sc.Scan() {
		line := sc.Text()
		for _, e := range sockperfErrs {
			if strings.Contains(line, e) {
				return SockperfResult{}, fmt.Errorf("sockperf: %s", strings.TrimSpace(strings.TrimPrefix(line, "sockperf:")))
			}
		}
		if m := validRE.FindStringSubmatch(line); m != nil {
			r.Duration, r.Sent, r.Received = f(m[1]), n(m[2]), n(m[3])
		} else if m := avgRE.FindStringSubmatch(line); m != nil {
			r.AvgUs, r.StdDevUs, latency = f(m[1]), f(m[2]), true
		} else if m := dropRE.FindStringSubmatch(line); m != nil {
			r.Dropped, r.Duplicated, r.OutOfOrder = n(m[1]), n(m[2]), n(m[3])
		} else if m := obsRE.FindStringSubmatch(line); m != nil {
			r.Observations = n(m[1])
		} else if m := pctRE.FindStringSubmatch(line); m != nil {
			if p := pcts[m[1]]; p != nil {
				*p = f(m[2])
			}
		} else if m := extremeRE.FindStringSubmatch(line); m != nil {
			if m[1] == "MAX" {
				r.MaxUs = f(m[2])
			} else {
				r.MinUs = f(m[2])
			}
		} else if m := tpTotalRE.FindStringSubmatch(line); m != nil {
			r.Sent, r.Duration = n(m[1]), f(m[2])
		} else if m := tpRateRE.FindStringSubmatch(line); m != nil {
			r.MsgPerSec, throughput = f(m[1]), true
		} else if m := tpBandRE.FindStringSubmatch(line); m != nil {
			r.Mbps = f(m[1])
		}
	}
	switch {
	case throughput:
		r.Mode = "throughput"
	case latency && r.Duration > 0:
		r.Mode = "latency"
		r.MsgPerSec = float64(r.Sent) / r.Duration
	default:
		return SockperfResult{}, fmt.Errorf("sockperf: no results in its output: %s", lastLines(string(stripANSI(b)), 3))
	}
	return r, nil
}
