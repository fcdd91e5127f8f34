package workload

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// WrkOpts describes one wrk --latency run against http://Addr:Port/Path.
type WrkOpts struct {
	Netns, Addr string
	Port        int
	Path        string
	Threads     int           // -t; 0 = 1
	Connections int           // -c: connections in all, spread over the threads
	Duration    time.Duration // -d, whole seconds
	CPUs        []int
}

// MaxWrkConnections bounds -c: wrk holds a descriptor per connection, and
// 1024 is the usual limit a process starts with.
const MaxWrkConnections = 1000

// WrkResult is what wrk reported over its whole run. Latencies are each
// request's round trip, from wrk's full (HdrHistogram) distribution.
type WrkResult struct {
	Seconds        float64 `json:"seconds"`
	Requests       int64   `json:"requests"`
	ReadBytes      float64 `json:"read_bytes"` // wrk prints 2 decimals of a binary unit
	RequestsPerSec float64 `json:"requests_per_sec"`
	BytesPerSec    float64 `json:"bytes_per_sec"`
	AvgUs          float64 `json:"avg_us"`
	StdevUs        float64 `json:"stdev_us"`
	MaxUs          float64 `json:"max_us"`
	P50Us          float64 `json:"p50_us"`
	P75Us          float64 `json:"p75_us"`
	P90Us          float64 `json:"p90_us"`
	P99Us          float64 `json:"p99_us"`
	// Socket errors, and responses of status 400 and above (wrk's
	// "Non-2xx or 3xx"). A timeout is a request answered later than wrk's
	// timeout (2 s), also among Requests.
	ConnectErrors int64 `json:"connect_errors"`
	ReadErrors    int64 `json:"read_errors"`
	WriteErrors   int64 `json:"write_errors"`
	Timeouts      int64 `json:"timeouts"`
	BadStatus     int64 `json:"bad_status"`
}

func (o WrkOpts) validate() error {
	if _, err := netip.ParseAddr(o.Addr); err != nil {
		return fmt.Errorf("wrk: server address %q: %v", o.Addr, err)
	}
	if err := checkPort("wrk port", o.Port, false); err != nil {
		return err
	}
	if !strings.HasPrefix(o.Path, "/") {
		return fmt.Errorf("wrk: path %q does not start with /", o.Path)
	}
	t := max(o.Threads, 1)
	if o.Connections < t || o.Connections > MaxWrkConnections {
		return fmt.Errorf("wrk: %d connections over %d threads, want %d..%d (at least one a thread)", o.Connections, t, t, MaxWrkConnections)
	}
	if o.Connections%t != 0 {
		return fmt.Errorf("wrk: %d connections over %d threads: wrk gives each thread an equal share and opens no remainder", o.Connections, t)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("wrk: duration must be positive, got %v", o.Duration)
	}
	return nil
}

func (o WrkOpts) args() []string {
	url := "http://" + netip.AddrPortFrom(netip.MustParseAddr(o.Addr), uint16(o.Port)).String() + o.Path
	return []string{"--latency", "-t", strconv.Itoa(max(o.Threads, 1)), "-c", strconv.Itoa(o.Connections),
		"-d", strconv.Itoa(seconds(o.Duration)) + "s", url}
}

// RunWrk runs one wrk client; it is killed when ctx ends, and at the latest
// 30 s after the run should have finished.
func RunWrk(ctx context.Context, o WrkOpts) (WrkResult, error) {
	if err := o.validate(); err != nil {
		return WrkResult{}, err
	}
	return runClient(ctx, client[WrkResult]{tool: "wrk", ns: o.Netns, cpus: o.CPUs, d: o.Duration, args: o.args(),
		parse:  func(stdout, _ []byte) (WrkResult, error) { return ParseWrk(stdout) },
		failed: func(stdout, stderr []byte) string { return lastLines(string(append(stdout, stderr...)), 5) }})
}

var (
	wrkLatRE   = regexp.MustCompile(`^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+%$`)
	wrkDistRE  = regexp.MustCompile(`^\s+(50|75|90|99)%\s+(\S+)$`)
	wrkTotalRE = regexp.MustCompile(`^\s+([0-9]+) requests in (\S+), (\S+) read$`)
	wrkSockRE  = regexp.MustCompile(`^\s+Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)$`)
	wrkBadRE   = regexp.MustCompile(`^\s+Non-2xx or 3xx responses: ([0-9]+)$`)
	wrkRateRE  = regexp.MustCompile(`^Requests/sec:\s+([0-9.]+)$`)
	wrkXferRE  = regexp.MustCompile(`^Transfer/sec:\s+(\S+)$`)
)

// ParseWrk reads wrk --latency's report (its stdout).
func ParseWrk(b []byte) (WrkResult, error) {
	var r WrkResult
	var bad error // the first figure not understood
	var total, rate bool
	unit := func(units map[string]float64, what string) func(string) float64 {
		return func(s string) float64 {
			m := wrkNumRE.FindStringSubmatch(s)
			if m == nil || units[m[2]] == 0 {
				bad = cmp.Or(bad, fmt.Errorf("wrk: %s %q not understood", what, s))
				return 0
			}
			v, _ := strconv.ParseFloat(m[1], 64)
			return v * units[m[2]]
		}
	}
	us, bytes := unit(wrkTimeUnits, "time"), unit(wrkByteUnits, "byte count")
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	dist := map[string]*float64{"50": &r.P50Us, "75": &r.P75Us, "90": &r.P90Us, "99": &r.P99Us}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r ")
		if m := wrkLatRE.FindStringSubmatch(line); m != nil {
			r.AvgUs, r.StdevUs, r.MaxUs = us(m[1]), us(m[2]), us(m[3])
		} else if m := wrkDistRE.FindStringSubmatch(line); m != nil {
			*dist[m[1]] = us(m[2])
		} else if m := wrkTotalRE.FindStringSubmatch(line); m != nil {
			r.Requests, r.Seconds, r.ReadBytes, total = n(m[1]), us(m[2])/1e6, bytes(m[3]), true
		} else if m := wrkSockRE.FindStringSubmatch(line); m != nil {
			r.ConnectErrors, r.ReadErrors, r.WriteErrors, r.Timeouts = n(m[1]), n(m[2]), n(m[3]), n(m[4])
		} else if m := wrkBadRE.FindStringSubmatch(line); m != nil {
			r.BadStatus = n(m[1])
		} else if m := wrkRateRE.FindStringSubmatch(line); m != nil {
			r.RequestsPerSec, _ = strconv.ParseFloat(m[1], 64)
			rate = true
		} else if m := wrkXferRE.FindStringSubmatch(line); m != nil {
			r.BytesPerSec = bytes(m[1])
		}
	}
	switch {
	case !total || !rate:
		return WrkResult{}, fmt.Errorf("wrk: no report in its output: %s", lastLines(string(b), 3))
	case r.Requests == 0: // its latencies read "-nan" then
		return WrkResult{}, fmt.Errorf("wrk: no request completed: %s", lastLines(string(b), 3))
	case bad != nil:
		return WrkResult{}, bad
	}
	return r, nil
}

// Errors is every request wrk counted as failed.
func (r WrkResult) Errors() int64 {
	return r.ConnectErrors + r.ReadErrors + r.WriteErrors + r.Timeouts + r.BadStatus
}

// wrk's units: times in µs, byte counts binary ("613.98us", "1.02ms",
// "2.00s"; "512.00B", "1.16GB").
var (
	wrkTimeUnits = map[string]float64{"us": 1, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}
	wrkByteUnits = map[string]float64{"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50}
	wrkNumRE     = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$`)
)
