package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// An iperf3 time series: the receiver's throughput interval by interval.
// A UDP client's own intervals count what it sent; what arrived is in the
// server's report, which the client fetches with --get-server-output and
// prints inside its JSON ("server_output_json"). The server reports at its
// own interval (its -i), so the server is started with the interval too.

// MinIperf3Interval is the shortest interval iperf3 reports at.
const MinIperf3Interval = 100 * time.Millisecond

// Iperf3Interval is one reporting interval, summed over the test's
// streams. Start and End are seconds since the test started (the data
// streams' start, on the reporting side's clock).
type Iperf3Interval struct {
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Seconds       float64 `json:"seconds"`
	Bytes         int64   `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	// UDP receiver: the datagrams the interval accounts for (received and
	// lost, by sequence number), those lost, and their share.
	Packets     int64   `json:"packets,omitempty"`
	LostPackets int64   `json:"lost_packets,omitempty"`
	LostPercent float64 `json:"lost_percent,omitempty"`
	Omitted     bool    `json:"omitted,omitempty"`
}

// Iperf3Series is a client's result with the intervals of the receiving
// side.
type Iperf3Series struct {
	Iperf3Result
	// Receiver says the intervals are the receiver's (the server's report);
	// false: the client's own, which for UDP count what was sent.
	Receiver  bool             `json:"receiver"`
	Intervals []Iperf3Interval `json:"intervals"`
}

func checkInterval(d time.Duration) error {
	if d < MinIperf3Interval || d > time.Minute {
		return fmt.Errorf("iperf3: interval %v out of range %v..1m", d, MinIperf3Interval)
	}
	return nil
}

func intervalArg(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// StartIperf3IntervalServer starts an iperf3 server, as StartIperf3Server
// does, that reports every interval in JSON: what RunIperf3Series's
// clients fetch.
func StartIperf3IntervalServer(ctx context.Context, ns string, port int, cpus []int, interval time.Duration) (Server, error) {
	if err := checkPort("iperf3 server port", port, false); err != nil {
		return nil, err
	}
	if err := checkInterval(interval); err != nil {
		return nil, err
	}
	if err := checkCommon("iperf3", ns, cpus); err != nil {
		return nil, err
	}
	argv := command(ns, cpus, "iperf3", "-s", "-p", strconv.Itoa(port), "-i", intervalArg(interval), "--json")
	return startServer(ctx, "iperf3 server", ns, "tcp", port, argv)
}

// RunIperf3Series runs one iperf3 client as RunIperf3 does, reporting every
// interval, and returns its result with the receiver's intervals (the
// server must be one of StartIperf3IntervalServer's).
func RunIperf3Series(ctx context.Context, o Iperf3Opts, interval time.Duration) (Iperf3Series, error) {
	if err := o.validate(); err != nil {
		return Iperf3Series{}, err
	}
	if err := checkInterval(interval); err != nil {
		return Iperf3Series{}, err
	}
	args := append(o.args(), "-i", intervalArg(interval), "--get-server-output")
	return runClient(ctx, client[Iperf3Series]{tool: "iperf3", ns: o.Netns, cpus: o.CPUs, d: o.Duration, args: args,
		parse: func(stdout, _ []byte) (Iperf3Series, error) { return ParseIperf3Series(stdout) },
		failed: func(stdout, stderr []byte) string {
			if len(strings.TrimSpace(string(stdout))) > 0 {
				return ""
			}
			return lastLines(string(stderr), 5)
		}})
}

type iperf3IntervalsJSON struct {
	Intervals []struct {
		Sum Iperf3Interval `json:"sum"`
	} `json:"intervals"`
	ServerOutputJSON *struct {
		Error     string `json:"error"`
		Intervals []struct {
			Sum Iperf3Interval `json:"sum"`
		} `json:"intervals"`
	} `json:"server_output_json"`
}

// ParseIperf3Series reads a client's iperf3 --json output: the end summary
// as ParseIperf3 reads it, and the intervals of the server's report where
// the client fetched it (--get-server-output), else its own.
func ParseIperf3Series(b []byte) (Iperf3Series, error) {
	r, err := ParseIperf3(b)
	if err != nil {
		return Iperf3Series{}, err
	}
	var j iperf3IntervalsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return Iperf3Series{}, fmt.Errorf("iperf3: output is not iperf3 --json: %w", err)
	}
	s := Iperf3Series{Iperf3Result: r}
	src := j.Intervals
	if so := j.ServerOutputJSON; so != nil {
		if so.Error != "" {
			return Iperf3Series{}, fmt.Errorf("iperf3 server: %s", so.Error)
		}
		src, s.Receiver = so.Intervals, true
	}
	for _, iv := range src {
		s.Intervals = append(s.Intervals, iv.Sum)
	}
	if len(s.Intervals) == 0 {
		return Iperf3Series{}, fmt.Errorf("iperf3: no intervals in the output")
	}
	return s, nil
}

// Steady is the series without a last interval shorter than half the one
// before it: the receiver's clock runs on after the sender stopped, so
// that stub holds the test's end, not the flow's rate (a 20 s TCP run can
// end with a 0.04 s interval at a fiftieth of the median).
func (s Iperf3Series) Steady() []Iperf3Interval {
	ivs := s.Intervals
	if n := len(ivs); n >= 2 && ivs[n-1].Seconds < ivs[n-2].Seconds/2 {
		return ivs[:n-1]
	}
	return ivs
}
