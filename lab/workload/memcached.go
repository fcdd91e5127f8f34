package workload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// StartMemcachedServer starts memcached on addr:port (TCP only) in network
// namespace ns, pinned to cpus when given, with threads worker threads, and
// returns once it listens. It runs as root: the testbed's namespaces are
// the machine's, and memcached refuses root without -u.
func StartMemcachedServer(ctx context.Context, ns, addr string, port int, cpus []int, threads int) (Server, error) {
	if err := checkPort("memcached port", port, false); err != nil {
		return nil, err
	}
	if threads < 1 || threads > 64 {
		return nil, fmt.Errorf("memcached: %d worker threads, want 1..64", threads)
	}
	if err := checkCommon("memcached", ns, cpus); err != nil {
		return nil, err
	}
	args := []string{"-u", "root", "-p", strconv.Itoa(port), "-U", "0", "-t", strconv.Itoa(threads), "-m", "256", "-c", "4096"}
	if addr != "" {
		args = append(args, "-l", addr)
	}
	return startServer(ctx, "memcached", ns, "tcp", port, command(ns, cpus, "memcached", args...))
}

// MemcaslapOpts describes one memcaslap run (libmemcached's memaslap): its
// default mix of 9 gets to 1 set over keys it sets first.
type MemcaslapOpts struct {
	Netns, Addr string
	Port        int
	Concurrency int           // -c: connections in all, spread over Threads
	Threads     int           // -T; 0 = 1
	Size        int           // -X: value bytes; 0 = memcaslap's default
	Duration    time.Duration // -t, whole seconds
	CPUs        []int
}

// MemcaslapResult is what memcaslap reported for all its operations.
// Latency percentiles are estimates: memcaslap keeps a histogram of
// power-of-two buckets (a bucket holds the latencies in (2^(k-1), 2^k] µs),
// and a percentile is interpolated linearly inside its bucket, so it is
// good to a factor of two at worst; Avg, Min and Max are exact.
type MemcaslapResult struct {
	Seconds   float64 `json:"seconds"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	GetMisses int64   `json:"get_misses"`
	Events    int64   `json:"events"` // operations timed
	MinUs     float64 `json:"min_us"`
	AvgUs     float64 `json:"avg_us"`
	MaxUs     float64 `json:"max_us"`
	P50Us     float64 `json:"p50_us"`
	P99Us     float64 `json:"p99_us"`
	// Log2 is the histogram: Log2[k] operations took (2^(k-1), 2^k] µs.
	Log2 []int64 `json:"log2"`
}

func (o MemcaslapOpts) validate() error {
	if a, err := netip.ParseAddr(o.Addr); err != nil || !a.Is4() {
		return fmt.Errorf("memcaslap: server address %q: want IPv4 (memcaslap resolves no IPv6 address)", o.Addr)
	}
	if err := checkPort("memcaslap port", o.Port, false); err != nil {
		return err
	}
	if o.Concurrency < 1 || o.Concurrency > 1024 {
		return fmt.Errorf("memcaslap: %d connections, want 1..1024", o.Concurrency)
	}
	if t := max(o.Threads, 1); o.Concurrency%t != 0 {
		return fmt.Errorf("memcaslap: %d connections over %d threads: memcaslap wants a multiple of the threads", o.Concurrency, t)
	}
	if o.Size < 0 || o.Size > 1<<20 {
		return fmt.Errorf("memcaslap: value size %d out of range 1..1048576", o.Size)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("memcaslap: duration must be positive, got %v", o.Duration)
	}
	return nil
}

func (o MemcaslapOpts) args() []string {
	a := []string{"-s", o.Addr + ":" + strconv.Itoa(o.Port), "-c", strconv.Itoa(o.Concurrency), "-T", strconv.Itoa(max(o.Threads, 1)),
		"-t", strconv.Itoa(seconds(o.Duration)) + "s",
		// Statistics (the latency histogram among them) are printed only
		// with a period; one period of the whole run prints them once.
		"-S", strconv.Itoa(seconds(o.Duration)) + "s"}
	if o.Size > 0 {
		a = append(a, "-X", strconv.Itoa(o.Size))
	}
	return a
}

// RunMemcaslap runs one memcaslap client; it is killed when ctx ends, and
// at the latest 30 s after the run should have finished.
func RunMemcaslap(ctx context.Context, o MemcaslapOpts) (MemcaslapResult, error) {
	if err := o.validate(); err != nil {
		return MemcaslapResult{}, err
	}
	return runClient(ctx, client[MemcaslapResult]{tool: "memcaslap", ns: o.Netns, cpus: o.CPUs, d: o.Duration, args: o.args(),
		parse:  func(stdout, stderr []byte) (MemcaslapResult, error) { return ParseMemcaslap(append(stdout, stderr...)) },
		failed: func(_, stderr []byte) string { return lastLines(string(stderr), 5) }})
}

var (
	mcRunRE    = regexp.MustCompile(`Run time: ([0-9.]+)s Ops: ([0-9]+) TPS: ([0-9]+)`)
	mcTotalRE  = regexp.MustCompile(`^Total Statistics \(([0-9]+) events\)`)
	mcStatRE   = regexp.MustCompile(`^\s+(Min|Max|Avg):\s+([0-9.]+)`)
	mcDistRE   = regexp.MustCompile(`^\s+([0-9]+):((?:\s+[0-9]+)+)\s*$`)
	mcMissRE   = regexp.MustCompile(`^get_misses: ([0-9]+)`)
	mcBlockEnd = regexp.MustCompile(`^\S`)
)

// ParseMemcaslap reads memcaslap's final report: the "Run time" line and
// the "Total Statistics (N events)" block with its Log2 Dist histogram.
func ParseMemcaslap(b []byte) (MemcaslapResult, error) {
	var r MemcaslapResult
	var run, total bool
	in := false // inside the Total Statistics block
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := mcTotalRE.FindStringSubmatch(line); m != nil {
			in, total = true, true
			r.Events, _ = strconv.ParseInt(m[1], 10, 64)
			continue
		}
		if in && line != "" && mcBlockEnd.MatchString(line) {
			in = false
		}
		switch {
		case in:
			if m := mcStatRE.FindStringSubmatch(line); m != nil {
				v, _ := strconv.ParseFloat(m[2], 64)
				switch m[1] {
				case "Min":
					r.MinUs = v
				case "Max":
					r.MaxUs = v
				case "Avg":
					r.AvgUs = v
				}
			} else if m := mcDistRE.FindStringSubmatch(line); m != nil {
				k, _ := strconv.Atoi(m[1])
				for i, f := range strings.Fields(m[2]) {
					n, err := strconv.ParseInt(f, 10, 64)
					if err != nil {
						return r, fmt.Errorf("memcaslap: histogram line %q: %v", line, err)
					}
					for len(r.Log2) <= k+i {
						r.Log2 = append(r.Log2, 0)
					}
					r.Log2[k+i] = n
				}
			}
		case mcMissRE.MatchString(line):
			r.GetMisses, _ = strconv.ParseInt(mcMissRE.FindStringSubmatch(line)[1], 10, 64)
		case mcRunRE.MatchString(line):
			m := mcRunRE.FindStringSubmatch(line)
			r.Seconds, _ = strconv.ParseFloat(m[1], 64)
			r.Ops, _ = strconv.ParseInt(m[2], 10, 64)
			r.OpsPerSec, _ = strconv.ParseFloat(m[3], 64)
			run = true
		}
	}
	if !run || !total {
		return MemcaslapResult{}, fmt.Errorf("memcaslap: no final report in its output: %s", lastLines(string(b), 3))
	}
	if r.Ops == 0 || len(r.Log2) == 0 {
		return MemcaslapResult{}, fmt.Errorf("memcaslap: no operation completed: %s", lastLines(string(b), 3))
	}
	r.P50Us = log2Percentile(r.Log2, 0.50, r.MinUs, r.MaxUs)
	r.P99Us = log2Percentile(r.Log2, 0.99, r.MinUs, r.MaxUs)
	return r, nil
}

// log2Percentile estimates quantile q of a histogram whose bucket k holds
// the values in (2^(k-1), 2^k], interpolating linearly inside the bucket
// and clamping to the exact minimum and maximum.
func log2Percentile(h []int64, q, lo, hi float64) float64 {
	var n int64
	for _, c := range h {
		n += c
	}
	want := q * float64(n)
	var seen float64
	for k, c := range h {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= want {
			low, high := 0.0, 1.0
			if k > 0 {
				low, high = float64(int64(1)<<(k-1)), float64(int64(1)<<k)
			}
			low, high = max(low, lo), min(high, hi)
			return low + (high-low)*(want-seen)/float64(c)
		}
		seen += float64(c)
	}
	return hi
}
