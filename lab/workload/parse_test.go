package workload

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseIperf3TCP(t *testing.T) {
	r, err := ParseIperf3(testdata(t, "iperf3-tcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Iperf3Result{Protocol: "TCP", Seconds: 1.000242, Bytes: 2339241232,
		BitsPerSecond: 18709402180.672276, SentBitsPerSecond: 18710437020.27721, Streams: 1, Retransmits: 7575}
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

func TestParseIperf3TCPParallel(t *testing.T) {
	r, err := ParseIperf3(testdata(t, "iperf3-tcp-p2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Streams != 2 || r.Bytes != 3798859776 || r.Retransmits != 32469 || r.BitsPerSecond != 30376813743.236877 {
		t.Errorf("got %+v", r)
	}
}

func TestParseIperf3UDP(t *testing.T) {
	r, err := ParseIperf3(testdata(t, "iperf3-udp.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Iperf3Result{Protocol: "UDP", Seconds: 1.000072, Bytes: 372117200,
		BitsPerSecond: 2976723275.9241333, SentBitsPerSecond: 3001270955.5165567, Streams: 1,
		Packets: 267973, LostPackets: 2175, LostPercent: 0.8116277334129413, JitterMs: 0.0040624467569534955,
		ReceivedPackets: 265798}
	want.PacketsPerSecond = float64(want.ReceivedPackets) / want.Seconds
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	// 1400-byte datagrams: received bytes and packets agree
	if r.Bytes != r.ReceivedPackets*1400 {
		t.Errorf("bytes %d != %d packets * 1400", r.Bytes, r.ReceivedPackets)
	}
}

func TestParseIperf3UDPParallel(t *testing.T) {
	r, err := ParseIperf3(testdata(t, "iperf3-udp-p2-16.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Streams != 2 || r.Packets != 253100 || r.LostPackets != 2580 || r.Bytes != (253100-2580)*16 {
		t.Errorf("got %+v", r)
	}
	if math.Abs(r.PacketsPerSecond-float64(253100-2580)/1.000127) > 1e-6 {
		t.Errorf("pps %v", r.PacketsPerSecond)
	}
}

func TestParseIperf3Errors(t *testing.T) {
	_, err := ParseIperf3(testdata(t, "iperf3-error.json"))
	if err == nil || !strings.Contains(err.Error(), "unable to connect to server: Connection refused") {
		t.Errorf("error output: %v", err)
	}
	for _, in := range []string{"", "iperf3: error", `{"start": {}, "end": {}}`} {
		if _, err := ParseIperf3([]byte(in)); err == nil {
			t.Errorf("ParseIperf3(%q): no error", in)
		}
	}
}

// A UDP client whose stream setup was lost (the error as iperf3 3.12
// reported it on 16 vCPUs, results/scale-16cpu-kvm/p3-flows/bench.log, in
// the JSON of iperf3-error.json) is ErrUDPSetupLost; the same words from a
// TCP client, or another failure, are not.
func TestUDPSetupLost(t *testing.T) {
	_, err := ParseIperf3(testdata(t, "iperf3-udp-setup-lost.json"))
	if err == nil {
		t.Fatal("no error")
	}
	if got := setupLost(true, err); !errors.Is(got, ErrUDPSetupLost) || !strings.Contains(got.Error(), "Resource temporarily unavailable") {
		t.Errorf("UDP: %v", got)
	}
	if got := setupLost(false, err); errors.Is(got, ErrUDPSetupLost) {
		t.Errorf("TCP: %v", got)
	}
	_, refused := ParseIperf3(testdata(t, "iperf3-error.json"))
	if got := setupLost(true, refused); errors.Is(got, ErrUDPSetupLost) {
		t.Errorf("connection refused: %v", got)
	}
	if setupLost(true, nil) != nil {
		t.Error("no error became one")
	}
}

func TestParseSockperfPingPong(t *testing.T) {
	for _, c := range []struct {
		file string
		want SockperfResult
	}{
		{"sockperf-pp-udp.txt", SockperfResult{Mode: "latency", Duration: 0.550, Sent: 12064, Received: 12064,
			AvgUs: 22.798, StdDevUs: 18.880, MinUs: 6.299, P25Us: 19.463, P50Us: 21.887,
			P75Us: 26.404, P90Us: 27.285, P99Us: 36.909, P999Us: 332.141, P9999Us: 707.893, P99999Us: 733.216,
			MaxUs: 733.216, Observations: 12064}},
		{"sockperf-pp-tcp.txt", SockperfResult{Mode: "latency", Duration: 0.550, Sent: 8905, Received: 8905,
			AvgUs: 30.860, StdDevUs: 7.590, MinUs: 10.165, P25Us: 27.636, P50Us: 29.463,
			P75Us: 33.084, P90Us: 35.923, P99Us: 45.973, P999Us: 102.201, P9999Us: 250.606, P99999Us: 474.544,
			MaxUs: 474.544, Observations: 8905}},
	} {
		r, err := ParseSockperf(testdata(t, c.file))
		if err != nil {
			t.Fatal(err)
		}
		c.want.MsgPerSec = float64(c.want.Sent) / c.want.Duration
		if r != c.want {
			t.Errorf("%s: got %+v\nwant %+v", c.file, r, c.want)
		}
	}
}

func TestParseSockperfUnderLoad(t *testing.T) {
	r, err := ParseSockperf(testdata(t, "sockperf-ul-udp.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// under load only every 100th message is answered and measured
	if r.Sent != 5201 || r.Received != 53 || r.Observations != 53 || r.P99Us != 39.591 || r.P50Us != 20.870 {
		t.Errorf("got %+v", r)
	}
	if r.MsgPerSec < 9000 || r.MsgPerSec > 11000 {
		t.Errorf("msg/s %v, the run asked for 10000", r.MsgPerSec)
	}
	if _, err := ParseSockperf(testdata(t, "sockperf-ul-tcp.txt")); err != nil {
		t.Error(err)
	}
}

func TestParseSockperfThroughput(t *testing.T) {
	r, err := ParseSockperf(testdata(t, "sockperf-tp-udp.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := SockperfResult{Mode: "throughput", Duration: 1.000, Sent: 207712, MsgPerSec: 207613, Mbps: 2217.546}
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	r, err = ParseSockperf(testdata(t, "sockperf-tp-tcp.txt"))
	if err != nil || r.MsgPerSec != 132067 || r.Mbps != 1410.628 {
		t.Errorf("tcp: %+v %v", r, err)
	}
}

func TestParseSockperfErrors(t *testing.T) {
	for file, msg := range map[string]string{
		"sockperf-pp-noserver.txt":     "No messages were received from the server",
		"sockperf-pp-tcp-noserver.txt": "Can`t connect socket (errno=111 Connection refused)",
		"sockperf-server-udp.txt":      "no results",
	} {
		_, err := ParseSockperf(testdata(t, file))
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", file, err, msg)
		}
	}
}

func TestParseSockperfServer(t *testing.T) {
	for file, want := range map[string]int64{"sockperf-server-udp.txt": 236543, "sockperf-server-tcp.txt": 156369} {
		n, err := ParseSockperfServer(testdata(t, file))
		if err != nil || n != want {
			t.Errorf("%s: %d %v, want %d", file, n, err, want)
		}
	}
	if _, err := ParseSockperfServer(testdata(t, "sockperf-pp-udp.txt")); err == nil {
		t.Error("client output: no error")
	}
}

func TestSocketOnPort(t *testing.T) {
	tcp := testdata(t, "proc-net-tcp6")
	if !socketOnPort(tcp, true, 5201) {
		t.Error("iperf3 listener on 5201 not found")
	}
	if socketOnPort(tcp, true, 5202) {
		t.Error("5202 found")
	}
	udp := testdata(t, "proc-net-udp")
	if !socketOnPort(udp, false, 11111) {
		t.Error("sockperf socket on 11111 not found")
	}
}

// TestParseMemcaslap: memcaslap -t 2s -S 2s -c 8 -X 100 against a local
// memcached; its histogram holds every timed operation.
func TestParseMemcaslap(t *testing.T) {
	r, err := ParseMemcaslap(testdata(t, "memcaslap-c8.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 171623 || r.OpsPerSec != 85796 || r.Seconds != 2.0 || r.Events != 171615 {
		t.Errorf("totals %+v", r)
	}
	if r.MinUs != 8 || r.AvgUs != 92 || r.MaxUs != 7111 || r.GetMisses != 0 {
		t.Errorf("min/avg/max/misses %v/%v/%v/%d, want 8/92/7111/0 (the Total block, not Get's)", r.MinUs, r.AvgUs, r.MaxUs, r.GetMisses)
	}
	var n int64
	for _, c := range r.Log2 {
		n += c
	}
	if n != r.Events || len(r.Log2) != 14 || r.Log2[3] != 11 || r.Log2[13] != 506 {
		t.Errorf("histogram %v (sum %d), want the Total block's 14 buckets summing to %d", r.Log2, n, r.Events)
	}
	// p50 falls in (32, 64] µs, p99 in (2048, 4096] µs.
	if math.Abs(r.P50Us-41.97) > 0.01 || math.Abs(r.P99Us-2069.5) > 0.1 {
		t.Errorf("p50 %.2f p99 %.2f, want 41.97 and 2069.5", r.P50Us, r.P99Us)
	}
	if _, err := ParseMemcaslap(testdata(t, "memcaslap-noserver.txt")); err == nil {
		t.Error("no error for a run that reached no server")
	}
}

func TestLog2Percentile(t *testing.T) {
	h := []int64{0, 10, 10} // 10 in (1,2], 10 in (2,4]
	for _, c := range []struct{ q, lo, hi, want float64 }{
		{0.5, 1, 4, 2}, {0.25, 1, 4, 1.5}, {0.75, 1, 4, 3}, {1, 1, 3, 3}, {0.05, 1.8, 4, 1.82},
	} {
		if got := log2Percentile(h, c.q, c.lo, c.hi); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q %v (min %v max %v): %v, want %v", c.q, c.lo, c.hi, got, c.want)
		}
	}
}

func TestMemcaslapArgs(t *testing.T) {
	o := MemcaslapOpts{Addr: "10.0.1.66", Port: 11211, Concurrency: 10, Threads: 2, Size: 100, Duration: 1500 * time.Millisecond}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	want := "-s 10.0.1.66:11211 -c 10 -T 2 -t 2s -S 2s -X 100"
	if got := strings.Join(o.args(), " "); got != want {
		t.Errorf("args %q, want %q", got, want)
	}
	for _, bad := range []MemcaslapOpts{
		{Addr: "fd00:1::42", Port: 11211, Concurrency: 1, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 0, Concurrency: 1, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 11211, Concurrency: 0, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 11211, Concurrency: 2, Threads: 3, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 11211, Concurrency: 1},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
