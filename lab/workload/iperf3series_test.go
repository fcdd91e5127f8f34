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
// against a server without --json; iperf3-tcp-series.json a TCP flow of
// 128 KiB writes at 231.68 Mbit/s (20K full segments/s) for 2 s and
// iperf3-tcp-series-heavy.json the same 5-tuple (--cport) flat out for
// 1 s right after it, over veth between two scratch namespaces.
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

// TestParseIperf3SeriesTCP: a TCP client's series is the server's too,
// in bytes (no datagrams), summing to the end summary.
func TestParseIperf3SeriesTCP(t *testing.T) {
	light, err := ParseIperf3Series(testdata(t, "iperf3-tcp-series.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !light.Receiver || light.Protocol != "TCP" || len(light.Intervals) != 20 {
		t.Fatalf("light: receiver %v, %s, %d intervals", light.Receiver, light.Protocol, len(light.Intervals))
	}
	var bytes int64
	for i, iv := range light.Intervals {
		// 231.68 Mbit/s in writes of 128 KiB: 22 writes a 0.1 s interval, give or take one.
		if iv.Seconds < 0.09 || iv.Seconds > 0.11 || iv.Packets != 0 || iv.BitsPerSecond < 0.9*231.68e6 || iv.BitsPerSecond > 1.1*231.68e6 {
			t.Errorf("light interval %d: %+v", i, iv)
		}
		bytes += iv.Bytes
	}
	if bytes != light.Bytes || light.BitsPerSecond < 0.99*231.68e6 || light.BitsPerSecond > 1.01*231.68e6 {
		t.Errorf("light: intervals hold %d bytes, the end summary %+v", bytes, light.Iperf3Result)
	}
	heavy, err := ParseIperf3Series(testdata(t, "iperf3-tcp-series-heavy.json"))
	if err != nil {
		t.Fatal(err)
	}
	// 10 intervals and a tail of 0.6 ms.
	if !heavy.Receiver || heavy.Protocol != "TCP" || heavy.BitsPerSecond < 10*light.BitsPerSecond || len(heavy.Intervals) != 11 ||
		heavy.Intervals[10].Seconds > 0.01 {
		t.Errorf("heavy: receiver %v, %.0f bit/s, %d intervals", heavy.Receiver, heavy.BitsPerSecond, len(heavy.Intervals))
	}
	if n := len(heavy.Steady()); n != 10 || len(light.Steady()) != 20 {
		t.Errorf("steady: heavy %d intervals, light %d; want the tail dropped, nothing else", n, len(light.Steady()))
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
