package workload

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The recorded outputs are iperf3 3.12 clients run with -i 0.1
// --get-server-output --json against "iperf3 -s -i 0.1 --json" (the
// servers StartIperf3IntervalServer starts): iperf3-udp-series.json a UDP
// flow of 1400 B at 20 Mbit/s for 2 s, iperf3-udp-series-heavy.json the
// same 5-tuple (--cport) flat out for 1 s right after it (on loopback in a
// scratch namespace), iperf3-udp-series-textserver.json the light client
// against a server without --json.
func TestParseIperf3Series(t *testing.T) {
	s, err := ParseIperf3Series(testdata(t, "iperf3-udp-series.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receiver || s.Protocol != "UDP" || len(s.Intervals) < 19 || len(s.Intervals) > 21 {
		t.Fatalf("series: receiver %v, %s, %d intervals", s.Receiver, s.Protocol, len(s.Intervals))
	}
	var bytes int64
	for i, iv := range s.Intervals {
		if iv.Seconds <= 0 || iv.Seconds > 0.15 || iv.End <= iv.Start || (i > 0 && iv.Start < s.Intervals[i-1].End-1e-3) {
			t.Errorf("interval %d: %+v", i, iv)
		}
		// The receiver's: 20 Mbit/s in datagrams of 1400 B, no loss.
		if iv.Bytes%1400 != 0 || iv.LostPackets != 0 {
			t.Errorf("interval %d: %d bytes, %d lost", i, iv.Bytes, iv.LostPackets)
		}
		bytes += iv.Bytes
	}
	if bytes != s.Bytes {
		t.Errorf("intervals hold %d bytes, the end summary %d", bytes, s.Bytes)
	}
	if s.BitsPerSecond < 19e6 || s.BitsPerSecond > 21e6 {
		t.Errorf("end summary %+v", s.Iperf3Result)
	}
	heavy, err := ParseIperf3Series(testdata(t, "iperf3-udp-series-heavy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !heavy.Receiver || heavy.BitsPerSecond < 10*s.BitsPerSecond || len(heavy.Intervals) < 9 {
		t.Errorf("heavy: receiver %v, %.0f bit/s, %d intervals", heavy.Receiver, heavy.BitsPerSecond, len(heavy.Intervals))
	}
	// Without the server's report the client's own intervals stand in,
	// marked as not the receiver's.
	own, err := ParseIperf3Series(testdata(t, "iperf3-udp.json"))
	if err != nil || own.Receiver || len(own.Intervals) != 1 {
		t.Errorf("client's own intervals: %+v, %v", own, err)
	}
	// A server reporting in text (no --json) sends its report as text,
	// which is not read: the client's intervals stand in.
	text, err := ParseIperf3Series(testdata(t, "iperf3-udp-series-textserver.json"))
	if err != nil || text.Receiver || len(text.Intervals) != 10 || text.Intervals[0].LostPackets != 0 {
		t.Errorf("text server: %+v, %v", text, err)
	}
	if _, err := ParseIperf3Series(testdata(t, "iperf3-error.json")); err == nil {
		t.Error("an iperf3 error parsed")
	}
}

func TestIperf3SeriesArgs(t *testing.T) {
	ctx := context.Background()
	o := Iperf3Opts{Addr: "10.0.0.2", Port: 5201, UDP: true, Duration: time.Second}
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 2 * time.Minute} {
		if _, err := RunIperf3Series(ctx, o, d); err == nil || !strings.Contains(err.Error(), "interval") {
			t.Errorf("interval %v: %v", d, err)
		}
		if _, err := StartIperf3IntervalServer(ctx, "", 5201, nil, d); err == nil || !strings.Contains(err.Error(), "interval") {
			t.Errorf("server interval %v: %v", d, err)
		}
	}
	if got := intervalArg(100 * time.Millisecond); got != "0.1" {
		t.Errorf("-i %s", got)
	}
}
