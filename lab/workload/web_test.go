package workload

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWrkArgs(t *testing.T) {
	o := WrkOpts{Addr: "10.0.1.66", Port: 8080, Path: NginxPath(1024), Threads: 2, Connections: 200, Duration: 1500 * time.Millisecond}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	want := "--latency -t 2 -c 200 -d 2s http://10.0.1.66:8080/index-1024.bin"
	if got := strings.Join(o.args(), " "); got != want {
		t.Errorf("args %q, want %q", got, want)
	}
	o.Addr = "fd00:1::42"
	if got := o.args()[len(o.args())-1]; got != "http://[fd00:1::42]:8080/index-1024.bin" {
		t.Errorf("IPv6 URL %q", got)
	}
	for _, bad := range []WrkOpts{
		{Addr: "server", Port: 8080, Path: "/", Connections: 1, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 0, Path: "/", Connections: 1, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 8080, Path: "index", Connections: 1, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 8080, Path: "/", Connections: 0, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 8080, Path: "/", Connections: 1001, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 8080, Path: "/", Threads: 4, Connections: 2, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 8080, Path: "/", Threads: 3, Connections: 200, Duration: time.Second},
		{Addr: "10.0.1.66", Port: 8080, Path: "/", Connections: 1},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestNginxConf(t *testing.T) {
	temps := nginxTempPaths(testdata(t, "nginx-V.txt"))
	if got := strings.Join(temps, " "); got != "client_body_temp_path fastcgi_temp_path proxy_temp_path scgi_temp_path uwsgi_temp_path" {
		t.Errorf("temp paths of Debian's build: %s", got)
	}
	// A build without uwsgi configures its path all the same.
	v := []byte("--http-uwsgi-temp-path=/var/lib/nginx/uwsgi --http-proxy-temp-path=/x --without-http_uwsgi_module")
	if got := strings.Join(nginxTempPaths(v), " "); got != "proxy_temp_path" {
		t.Errorf("temp paths without uwsgi: %s", got)
	}
	o := NginxOpts{Addr: "fd00:1::42", Port: 8080, Workers: 2, Size: 1024}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	conf := nginxConf("/tmp/d", o, temps)
	for _, want := range []string{"worker_processes 2;", "pid /tmp/d/nginx.pid;", "error_log stderr", "access_log off;",
		"listen [fd00:1::42]:8080;", "root /tmp/d/www;", "client_body_temp_path /tmp/d/client_body_temp;", "scgi_temp_path /tmp/d/scgi_temp;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
	o.Workers = 0
	if !strings.Contains(nginxConf("/tmp/d", o, nil), "worker_processes auto;") {
		t.Error("0 workers is not auto")
	}
	for _, bad := range []NginxOpts{
		{Addr: "", Port: 8080, Size: 1},
		{Addr: "10.0.0.1", Port: 70000, Size: 1},
		{Addr: "10.0.0.1", Port: 8080, Size: 0},
		{Addr: "10.0.0.1", Port: 8080, Size: MaxPageSize + 1},
		{Addr: "10.0.0.1", Port: 8080, Size: 1, Workers: -1},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func needWeb(t *testing.T) {
	t.Helper()
	needPair(t)
	if err := CheckTools("nginx", "wrk"); err != nil {
		t.Skip(err)
	}
}

// TestNginxAndWrk serves a file from nsB to wrk in nsA, then stops nginx:
// no process and no directory is left.
func TestNginxAndWrk(t *testing.T) {
	needWeb(t)
	s, err := StartNginx(context.Background(), NginxOpts{Netns: nsB, Addr: addrB, Port: 18080, CPUs: []int{1}, Workers: 1, Size: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	dir := s.(*NginxServer).dir
	r, err := RunWrk(context.Background(), WrkOpts{Netns: nsA, Addr: addrB, Port: 18080, Path: NginxPath(16 << 10),
		Connections: 20, Duration: time.Second, CPUs: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests <= 0 || r.RequestsPerSec <= 0 || r.Errors() != 0 || r.P50Us <= 0 || r.P50Us > r.P99Us || r.P99Us > r.MaxUs {
		t.Errorf("wrk: %+v", r)
	}
	// Every response carried the file: 16 KiB and its headers.
	if per := r.ReadBytes / float64(r.Requests); per < 16<<10 || per > 17<<10 {
		t.Errorf("%.0f bytes read per request, want the 16 KiB file and its headers", per)
	}
	if err := s.Stop(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("nginx's directory %s left: %v", dir, err)
	}
	noProcsLeft(t)
}

func TestWrkNoServer(t *testing.T) {
	needWeb(t)
	_, err := RunWrk(context.Background(), WrkOpts{Netns: nsA, Addr: addrB, Port: 18099, Path: "/", Connections: 1, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("error %v", err)
	}
}

// TestNginxFailsClean: nginx that cannot bind its address leaves no
// directory behind.
func TestNginxFailsClean(t *testing.T) {
	needWeb(t)
	glob := filepath.Join(os.TempDir(), "falcon-nginx-*")
	before, _ := filepath.Glob(glob)
	_, err := StartNginx(context.Background(), NginxOpts{Netns: nsB, Addr: "10.231.9.9", Port: 18081, Size: 100})
	if err == nil || !strings.Contains(err.Error(), "exited before listening") {
		t.Errorf("error %v", err)
	}
	if after, _ := filepath.Glob(glob); len(after) != len(before) {
		t.Errorf("nginx directories before %v, after %v", before, after)
	}
	noProcsLeft(t)
}

// TestParseWrk: wrk --latency against nginx on loopback (nginx on CPU 1,
// wrk on CPU 0): 1 KiB over 20 connections, 64 KiB over 200 on 2 threads,
// a run whose server was stopped after 1.2 s of 3, and one asking for a
// file that is not there.
func TestParseWrk(t *testing.T) {
	r, err := ParseWrk(testdata(t, "wrk-1k-c20.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := WrkResult{Seconds: 2.10, Requests: 100110, ReadBytes: 122.01 * (1 << 20), RequestsPerSec: 47678.78, BytesPerSec: 58.11 * (1 << 20),
		AvgUs: 828.95, StdevUs: 1290, MaxUs: 16270, P50Us: 241, P75Us: 920, P90Us: 2420, P99Us: 5110}
	if !closeWrk(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	r, err = ParseWrk(testdata(t, "wrk-64k-c200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 66800 || r.RequestsPerSec != 32810.01 || math.Abs(r.BytesPerSec-2.01*(1<<30)) > 1 || r.P99Us != 30920 || r.MaxUs != 69450 || r.Errors() != 0 {
		t.Errorf("64 KiB: %+v", r)
	}
	// 4.09 GiB over 66800 requests: the 64 KiB file and its headers each.
	if per := r.ReadBytes / float64(r.Requests); per < 64<<10 || per > 66<<10 {
		t.Errorf("64 KiB: %.0f bytes a request", per)
	}
	r, err = ParseWrk(testdata(t, "wrk-stopped.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 52393 || r.ConnectErrors != 0 || r.ReadErrors != 32 || r.WriteErrors != 216849 || r.Timeouts != 0 || r.Errors() != 216881 {
		t.Errorf("stopped server: %+v", r)
	}
	r, err = ParseWrk(testdata(t, "wrk-404.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 48347 || r.BadStatus != 48347 || r.Errors() != 48347 {
		t.Errorf("404s: %+v", r)
	}
}

func closeWrk(a, b WrkResult) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-6*math.Max(1, math.Abs(y)) }
	return a.Requests == b.Requests && a.Errors() == b.Errors() && near(a.Seconds, b.Seconds) && near(a.ReadBytes, b.ReadBytes) &&
		near(a.RequestsPerSec, b.RequestsPerSec) && near(a.BytesPerSec, b.BytesPerSec) && near(a.AvgUs, b.AvgUs) &&
		near(a.StdevUs, b.StdevUs) && near(a.MaxUs, b.MaxUs) && near(a.P50Us, b.P50Us) && near(a.P75Us, b.P75Us) &&
		near(a.P90Us, b.P90Us) && near(a.P99Us, b.P99Us)
}

func TestParseWrkErrors(t *testing.T) {
	for in, msg := range map[string]string{
		string(testdata(t, "wrk-noserver.txt")): "no report",
		"":                                      "no report",
		"  0 requests in 1.00s, 0.00B read\nRequests/sec:      0.00\nTransfer/sec:       0.00B\n":                  "no request completed",
		"    Latency   1.00xs  1.00ms  2.00ms  50.00%\n  10 requests in 1.00s, 1.00KB read\nRequests/sec: 10.00\n": `time "1.00xs"`,
		"  10 requests in 1.00s, 1.00QB read\nRequests/sec: 10.00\n":                                               `byte count "1.00QB"`,
	} {
		if _, err := ParseWrk([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want %q", in, err, msg)
		}
	}
}
