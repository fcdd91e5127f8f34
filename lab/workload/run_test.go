package workload

import (
	"context"
	"errors"
	"fmt"
	"github.com/falconnet/falcon/lab/roottest"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A pair of namespaces joined by a veth, shared by the runner tests:
// client in nsA (10.231.0.1), servers in nsB (10.231.0.2).
var (
	nsA, nsB = fmt.Sprintf("fctw%da", os.Getpid()), fmt.Sprintf("fctw%db", os.Getpid())
	addrB    = "10.231.0.2"
)

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func setupPair() error {
	va, vb := fmt.Sprintf("fw%da", os.Getpid()), fmt.Sprintf("fw%db", os.Getpid())
	for _, c := range [][]string{
		{"ip", "netns", "add", nsA},
		{"ip", "netns", "add", nsB},
		{"ip", "link", "add", va, "netns", nsA, "type", "veth", "peer", "name", vb, "netns", nsB},
		{"ip", "-n", nsA, "addr", "add", "10.231.0.1/24", "dev", va},
		{"ip", "-n", nsB, "addr", "add", addrB + "/24", "dev", vb},
		{"ip", "-n", nsA, "link", "set", va, "up"},
		{"ip", "-n", nsB, "link", "set", vb, "up"},
		{"ip", "-n", nsA, "link", "set", "lo", "up"},
		{"ip", "-n", nsB, "link", "set", "lo", "up"},
	} {
		if err := sh(c...); err != nil {
			return err
		}
	}
	return nil
}

func teardownPair() {
	for _, ns := range []string{nsA, nsB} {
		_ = exec.Command("ip", "netns", "del", ns).Run() // the veth goes with it
	}
}

var havePair bool

func TestMain(m *testing.M) {
	if roottest.May() && CheckTools("ip", "iperf3", "sockperf", "taskset") == nil {
		if err := setupPair(); err != nil {
			teardownPair()
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		havePair = true
	}
	code := m.Run()
	if havePair {
		teardownPair()
	}
	os.Exit(code)
}

func needPair(t *testing.T) {
	t.Helper()
	if !havePair {
		t.Skip("needs root, ip, iperf3, sockperf and taskset")
	}
}

// nsPids lists the processes in a namespace: what must be empty after a run.
func nsPids(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func noProcsLeft(t *testing.T) {
	t.Helper()
	for _, ns := range []string{nsA, nsB} {
		if p := nsPids(t, ns); p != "" {
			t.Errorf("processes left in %s: %s", ns, p)
		}
	}
}

func iperf3Server(t *testing.T, port int) Server {
	t.Helper()
	s, err := StartIperf3Server(context.Background(), nsB, port, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func TestIperf3(t *testing.T) {
	needPair(t)
	s := iperf3Server(t, 15201)
	base := Iperf3Opts{Netns: nsA, Addr: addrB, Port: 15201, Duration: time.Second, CPUs: []int{0}}
	t.Run("tcp", func(t *testing.T) {
		r, err := RunIperf3(context.Background(), base)
		if err != nil {
			t.Fatal(err)
		}
		if r.Protocol != "TCP" || r.Bytes <= 0 || r.BitsPerSecond <= 0 || r.Seconds < 0.9 {
			t.Errorf("%+v", r)
		}
	})
	t.Run("udp", func(t *testing.T) {
		o := base
		o.UDP, o.Size = true, 1400
		r, err := RunIperf3(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Protocol != "UDP" || r.ReceivedPackets <= 0 || r.Bytes != r.ReceivedPackets*1400 || r.PacketsPerSecond <= 0 {
			t.Errorf("%+v", r)
		}
	})
	t.Run("tcp-parallel", func(t *testing.T) {
		o := base
		o.Parallel, o.Size, o.CPort = 2, 1000, 16001
		r, err := RunIperf3(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Streams != 2 || r.Bytes <= 0 {
			t.Errorf("%+v", r)
		}
	})
	if err := s.Stop(); err != nil {
		t.Error(err)
	}
	noProcsLeft(t)
}

func TestIperf3NoServer(t *testing.T) {
	needPair(t)
	_, err := RunIperf3(context.Background(), Iperf3Opts{Netns: nsA, Addr: addrB, Port: 15299, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("error %v", err)
	}
}

func TestSockperf(t *testing.T) {
	needPair(t)
	udp, err := StartSockperfServer(context.Background(), nsB, addrB, 11111, []int{1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Stop()
	tcp, err := StartSockperfServer(context.Background(), nsB, addrB, 11112, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Stop()
	for _, o := range []SockperfOpts{
		{Mode: "ping-pong", Size: 64},
		{Mode: "ping-pong", Size: 64, TCP: true},
		{Mode: "under-load", Size: 64, MPS: 2000},
		{Mode: "throughput", Size: 1400},
	} {
		o.Netns, o.Addr, o.Port, o.Duration, o.CPUs = nsA, addrB, 11111, time.Second, []int{0}
		if o.TCP {
			o.Port = 11112
		}
		r, err := RunSockperf(context.Background(), o)
		if err != nil {
			t.Errorf("%+v: %v", o, err)
			continue
		}
		if r.Mode != o.Mode || r.Sent <= 0 || r.MsgPerSec <= 0 {
			t.Errorf("%+v: %+v", o, r)
		}
		if o.Mode != "throughput" && (r.Received <= 0 || r.P50Us <= 0 || r.MinUs > r.P50Us || r.P50Us > r.P99Us || r.P99Us > r.MaxUs) {
			t.Errorf("%+v: latencies %+v", o, r)
		}
	}
	if err := udp.Stop(); err != nil {
		t.Error(err)
	}
	if n, err := udp.(*SockperfServer).Received(); err != nil || n <= 0 {
		t.Errorf("server total %d %v", n, err)
	}
	if err := tcp.Stop(); err != nil {
		t.Error(err)
	}
	noProcsLeft(t)
}

func TestServerStopKillsIt(t *testing.T) {
	needPair(t)
	s := iperf3Server(t, 15202)
	pid := s.(*server).p.cmd.Process.Pid
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server pid %d still there after Stop: %v", pid, err)
	}
	if err := s.Stop(); err != nil { // idempotent
		t.Error(err)
	}
}

func TestContextEndKills(t *testing.T) {
	needPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := StartIperf3Server(ctx, nsB, 15203, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := RunIperf3(ctx, Iperf3Opts{Netns: nsA, Addr: addrB, Port: 15203, Duration: 60 * time.Second})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond) // let the test start; nothing is asserted on time
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunIperf3 after cancel: %v", err)
	}
	<-s.(*server).p.done // the server dies with its context
	s.Stop()
	noProcsLeft(t)
}

func TestServerPortInUse(t *testing.T) {
	needPair(t)
	iperf3Server(t, 15204)
	_, err := StartIperf3Server(context.Background(), nsB, 15204, nil)
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Errorf("second server on the same port: %v", err)
	}
}

func TestServerDiesEarly(t *testing.T) {
	needPair(t)
	// an address the namespace does not have: sockperf cannot bind
	_, err := StartSockperfServer(context.Background(), nsB, "10.231.9.9", 11113, nil, false)
	if err == nil || !strings.Contains(err.Error(), "exited before listening") {
		t.Errorf("error %v", err)
	}
	noProcsLeft(t)
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	ok := Iperf3Opts{Addr: "10.0.0.1", Port: 5201, Duration: time.Second}
	bad := map[string]Iperf3Opts{}
	for name, f := range map[string]func(*Iperf3Opts){
		"no addr":     func(o *Iperf3Opts) { o.Addr = "" },
		"port":        func(o *Iperf3Opts) { o.Port = 70000 },
		"duration":    func(o *Iperf3Opts) { o.Duration = 0 },
		"udp size":    func(o *Iperf3Opts) { o.UDP, o.Size = true, 65536 },
		"bitrate":     func(o *Iperf3Opts) { o.Bitrate = "fast" },
		"parallel":    func(o *Iperf3Opts) { o.Parallel = -1 },
		"netns":       func(o *Iperf3Opts) { o.Netns = "fct-no-such-netns" },
		"offline cpu": func(o *Iperf3Opts) { o.CPUs = []int{4096} },
		"client port": func(o *Iperf3Opts) { o.CPort = -2 },
	} {
		o := ok
		f(&o)
		bad[name] = o
	}
	for name, o := range bad {
		if _, err := RunIperf3(ctx, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, o := range []SockperfOpts{
		{Mode: "pingpong", Addr: "10.0.0.1", Port: 1, Duration: time.Second},
		{Mode: "ping-pong", Addr: "10.0.0.1", Port: 1, Duration: time.Second, Size: 13},
		{Mode: "under-load", Addr: "10.0.0.1", Port: 1, Duration: time.Second},
		{Mode: "ping-pong", Addr: "10.0.0.1", Port: 1, Duration: time.Second, Netns: "fct-no-such-netns"},
	} {
		if _, err := RunSockperf(ctx, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := StartIperf3Server(ctx, "fct-no-such-netns", 5201, nil); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing netns: %v", err)
	}
}

func TestCheckTools(t *testing.T) {
	err := CheckTools("sh", "fct-no-such-tool", "sockperf-not-there")
	if err == nil || !strings.Contains(err.Error(), "fct-no-such-tool not found: apt-get install fct-no-such-tool") {
		t.Errorf("error %v", err)
	}
	if CheckTools("sh") != nil {
		t.Error("sh not found")
	}
}

// A tool must outlive the OS thread of the goroutine that started it: Go
// discards threads that switched namespaces (netns, journal), and a child
// forked on one would get its Pdeathsig (SIGKILL) then. Several tries,
// since a goroutine that happens to run on the main thread keeps it.
func TestToolOutlivesStartingThread(t *testing.T) {
	var ps []*proc
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	for range 4 {
		var (
			p   *proc
			err error
		)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: this thread exits with the goroutine
			p, err = start(context.Background(), "sleep", []string{"sleep", "5"}, io.Discard, io.Discard)
		}()
		<-done
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	time.Sleep(300 * time.Millisecond)
	for i, p := range ps {
		if p.exited() {
			t.Errorf("sleep %d died with the thread that started it: %v", i, p.waitErr)
		}
	}
}
