package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// integration runs real benches: root, real testbeds, real tools.
func integration(t *testing.T, suffix string) (online []int, name func(int) string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test")
	}
	labtest.NeedRoot(t)
	online, err := cpuset.Online()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("bt%d%s", os.Getpid(), suffix)
	t.Cleanup(func() { assertNoNamespaces(t, "fb-"+tag+"-") })
	return online, func(i int) string { return fmt.Sprintf("%s-%d", tag, i) }
}

// benchRun resolves args, checks them as bench does and runs them on
// testbeds named by name.
// splitModes is modes without falcon+split where this kernel cannot split
// (datapath.SplitSupported says why, in the log).
func splitModes(t *testing.T, modes string) string {
	t.Helper()
	err := datapath.SplitSupported()
	if err == nil {
		return modes
	}
	t.Logf("without falcon+split: %v", err)
	return strings.Join(slices.DeleteFunc(strings.Split(modes, ","), func(m string) bool { return m == "falcon+split" }), ",")
}

func benchRun(t *testing.T, online []int, name func(int) string, args ...string) *schema.File {
	t.Helper()
	c, err := resolve(t, online, args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := Preflight(c); err != nil {
		t.Fatal(err)
	}
	f, err := Execute(context.Background(), c, RunOptions{Version: "test", Command: "go test", TestbedName: name,
		Progress: NewProgress(io.Discard, false, true, CountRuns(mustPlan(t, c), c), 0)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustPlan(t *testing.T, c schema.Config) []TestbedPlan {
	t.Helper()
	plan, _, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// eachRun calls check with every result of f that has exactly one run and
// no errors, reporting the others; what names the result.
func eachRun(t *testing.T, f *schema.File, check func(what string, r schema.Result, run schema.Run)) {
	t.Helper()
	for _, r := range f.Results {
		what := fmt.Sprintf("%s/%s %s ×%d", r.Layout, r.Mode, r.Workload, r.Flows)
		if len(r.Errors) > 0 || len(r.Runs) != 1 {
			t.Errorf("%s: %d runs, errors %q", what, len(r.Runs), r.Errors)
			continue
		}
		check(what, r, r.Runs[0])
	}
}

func assertNoNamespaces(t *testing.T, prefix string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix) {
			t.Errorf("namespace left behind: %s", l)
			exec.Command("ip", "netns", "del", strings.Fields(l)[0]).Run()
		}
	}
}

func TestBenchHostAndDocker(t *testing.T) {
	online, name := integration(t, "a")
	c, err := resolve(t, online, "--layouts", "host,docker", "--workloads", "udp-stress:16,tcp:64K",
		"--runs", "1", "--duration", "1s", "--stage-cost")
	if err != nil {
		t.Fatal(err)
	}
	if err := Preflight(c); err != nil {
		t.Fatal(err)
	}
	var checkpoints []int
	f, err := Execute(context.Background(), c, RunOptions{Version: "test", Command: "go test", TestbedName: name,
		Progress: NewProgress(io.Discard, false, true, 4, 0),
		Checkpoint: func(f *schema.File) error {
			if !f.Partial {
				t.Error("checkpoint not marked partial")
			}
			checkpoints = append(checkpoints, len(f.Results))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(checkpoints) != 1 || checkpoints[0] != 2 || f.Partial {
		t.Errorf("checkpoints with %v results (want one, after the host testbed's 2); final partial %v", checkpoints, f.Partial)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := schema.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	if f, err = schema.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if f.Machine.Cores != len(online) || f.Machine.Kernel == "" || f.Interrupted || len(f.Results) != 4 {
		t.Fatalf("file: machine %+v, interrupted %v, %d results", f.Machine, f.Interrupted, len(f.Results))
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		if run.PPS <= 0 || run.Gbps <= 0 || run.WindowS < 0.9 || len(run.Tool) == 0 {
			t.Errorf("%s: pps %v gbps %v window %v, %d tool results", what, run.PPS, run.Gbps, run.WindowS, len(run.Tool))
		}
		for _, cpu := range online {
			if _, ok := run.CPU[cpu]; !ok {
				t.Errorf("%s: CPU %d missing", what, cpu)
			}
		}
		if r.Summary["pps"].Mean != run.PPS || r.Baseline != "host/vanilla" || r.Normalized["pps"].Mean <= 0 {
			t.Errorf("%s: summary %+v, baseline %q, normalised %+v", what, r.Summary["pps"], r.Baseline, r.Normalized["pps"])
		}
		if r.Workload == "tcp" && (run.OutOfOrder == nil || run.Retransmits == nil || run.Counters["rx.Tcp.InSegs"] <= 0) {
			t.Errorf("%s: TCP counters missing: %+v", what, run.Counters)
		}
		if o := run.Reordering; (r.Workload == "tcp") != (o != nil) || o != nil && (o.InSegs != run.Counters["rx.Tcp.InSegs"] || o.InSegs <= 0 ||
			r.Summary["tcp_retrans"].N != 1) {
			t.Errorf("%s: reordering %+v, counters %+v", what, o, run.Counters)
		}
		if r.Workload == "udp-stress" && (run.Counters["tx.Udp.OutDatagrams"] <= 0 || r.Clients != 3) {
			t.Errorf("%s: UDP counters %+v, %d clients", what, run.Counters, r.Clients)
		}
		// --stage-cost: the receiving host's stages were timed.
		segs, ns := map[string]uint64{}, map[string]uint64{}
		for _, s := range run.Stages {
			segs[s.Stage] += s.Segs
			ns[s.Stage] += s.Ns
		}
		want := []string{"nic"}
		if r.Layout == "docker" {
			want = append(want, "vxlan", "container")
		}
		for _, st := range want {
			if segs[st] == 0 || ns[st] == 0 {
				t.Errorf("%s: stage %s: %d segments, %d ns; stages %+v", what, st, segs[st], ns[st], run.Stages)
			}
		}
	})
}

// TestBenchMemcached runs the memcached workload (memcached in the server
// container, memcaslap in the client's) with 1 and 10 clients (10 and 100 connections), on the
// host and on docker, vanilla and with falcon+split (Host+ on the host).
func TestBenchMemcached(t *testing.T) {
	online, name := integration(t, "m")
	modes, want := splitModes(t, "vanilla,falcon+split"), 8
	if modes == "vanilla" {
		want = 4
	}
	f := benchRun(t, online, name, "--layouts", "host,docker", "--modes", modes,
		"--workloads", "memcached:100", "--flows", "1,10", "--runs", "1", "--duration", "1s")
	if len(f.Results) != want { // falcon+split on host is Host+
		t.Fatalf("%d results, want %s on both layouts, each with 1 and 10 clients", len(f.Results), modes)
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		l := run.Latency
		if run.PPS <= 0 || l == nil || l.P50Us <= 0 || l.P99Us < l.P50Us || len(run.Tool) != 1 || run.Counters["rx.Tcp.InSegs"] <= 0 {
			t.Errorf("%s: ops/s %v, latency %+v, %d tool results, counters %v", what, run.PPS, l, len(run.Tool), run.Counters)
			return
		}
		if !strings.Contains(string(run.Tool[0]), `"ops_per_sec"`) {
			t.Errorf("%s: tool result %s is not memcaslap's", what, run.Tool[0])
		}
		if workload.JudgedBy(r.Workload) != "pps" || r.Normalized["pps"].Mean <= 0 {
			t.Errorf("%s: judged by %s, normalised %+v", what, workload.JudgedBy(r.Workload), r.Normalized["pps"])
		}
	})
}

// TestBenchHostPlus: falcon+split runs on the host layout as FALCON's
// Host+ (Fig. 13 c, d), splitting the receiving host's own NIC, beside host
// vanilla; the split was on the path all the window (paper policy) and TCP
// got its segments in order.
func TestBenchHostPlus(t *testing.T) {
	online, name := integration(t, "p")
	if err := datapath.SplitSupported(); err != nil {
		t.Skip(err)
	}
	f := benchRun(t, online, name, "--layouts", "host", "--modes", "vanilla,falcon+split:policy=paper",
		"--workloads", "multi-flow-tcp:4K", "--flows", "2", "--runs", "1", "--duration", "1s")
	if len(f.Results) != 2 {
		t.Fatalf("%d results, want host/vanilla and host/falcon+split", len(f.Results))
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		if run.Gbps <= 0 || run.OutOfOrder == nil || run.Retransmits == nil {
			t.Errorf("%s: %.2f Gbit/s, out of order %v, retransmits %v", what, run.Gbps, run.OutOfOrder, run.Retransmits)
			return
		}
		// A segment lost at the split CPU's queue bound leaves a hole
		// that later ones queue behind: out of order is reordering only
		// where nothing was retransmitted.
		if *run.OutOfOrder != 0 && *run.Retransmits == 0 {
			t.Errorf("%s: %d segments out of order with none retransmitted", what, *run.OutOfOrder)
		}
		t.Logf("%s: %.2f Gbit/s, %d out of order, %d retransmits, falcon %+v", what, run.Gbps, *run.OutOfOrder, *run.Retransmits, run.Falcon)
		if r.Mode != "vanilla" && (run.Falcon == nil || run.Falcon.OnPathPct < 99) {
			t.Errorf("%s: falcon's activity %+v, want the split on the path all the window", what, run.Falcon)
		}
	})
}

// TestBenchWeb runs the web workload (nginx in the server container, wrk
// in the client's, 200 connections) on the host, and on docker with and
// without falcon; no nginx is left, nor its directory.
func TestBenchWeb(t *testing.T) {
	online, name := integration(t, "w")
	f := benchRun(t, online, name, "--layouts", "host,docker", "--modes", "vanilla,falcon",
		"--workloads", "web:16K", "--flows", "200", "--runs", "1", "--duration", "2s")
	if len(f.Results) != 3 { // host: vanilla only
		t.Fatalf("%d results, want host/vanilla and docker's two modes", len(f.Results))
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		l := run.Latency
		if run.PPS <= 0 || run.Gbps <= 0 || l == nil || l.P50Us <= 0 || l.P99Us < l.P50Us || len(run.Tool) != 1 || run.Counters["rx.Tcp.InSegs"] <= 0 {
			t.Errorf("%s: requests/s %v, Gbit/s %v, latency %+v, %d tool results, counters %v", what, run.PPS, run.Gbps, l, len(run.Tool), run.Counters)
			return
		}
		if !strings.Contains(string(run.Tool[0]), `"requests_per_sec"`) || run.LossPct != 0 {
			t.Errorf("%s: tool result %s (not wrk's, or with errors), loss %v", what, run.Tool[0], run.LossPct)
		}
		if workload.JudgedBy(r.Workload) != "pps" || r.Normalized["pps"].Mean <= 0 || r.Flows != 200 {
			t.Errorf("%s: judged by %s, normalised %+v, flows %d", what, workload.JudgedBy(r.Workload), r.Normalized["pps"], r.Flows)
		}
	})
	if out, err := exec.Command("pgrep", "-x", "nginx").Output(); err == nil {
		t.Errorf("nginx left running: %s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "falcon-nginx-*")); len(left) > 0 {
		t.Errorf("nginx directories left: %v", left)
	}
}

// TestBenchIPv6 runs iperf3's UDP and TCP, and web, over an IPv6 docker
// testbed, vanilla and falcon: UDP is counted from snmp6 (Udp6).
func TestBenchIPv6(t *testing.T) {
	online, name := integration(t, "6")
	f := benchRun(t, online, name, "--ipv6", "--layouts", "docker", "--modes", "vanilla,falcon",
		"--workloads", "udp:1400,tcp:64K,web:1K", "--flows", "20", "--runs", "1", "--duration", "1s")
	if !f.Config.IPv6 || len(f.Results) != 6 {
		t.Fatalf("ipv6 %v, %d results", f.Config.IPv6, len(f.Results))
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		if run.PPS <= 0 || run.Gbps <= 0 {
			t.Errorf("%s: pps %v gbps %v", what, run.PPS, run.Gbps)
		}
		if r.Workload == "udp" && run.Counters["rx.Udp.InDatagrams"] <= 0 {
			t.Errorf("%s: no UDP datagram counted: %v", what, run.Counters)
		}
		if r.Workload == "web" && (run.LossPct != 0 || run.Latency == nil) {
			t.Errorf("%s: requests failed (%v %%) or no latency: %s", what, run.LossPct, run.Tool[0])
		}
	})
}

// TestBenchDaemonLayouts runs vanilla and falcon on the real Flannel
// (flanneld, etcd, the CNI plugins) and the real Docker swarm, in one
// bench: a run each, measured, with each layout's vanilla as the baseline.
func TestBenchDaemonLayouts(t *testing.T) {
	online, name := integration(t, "f")
	var layouts []string
	for _, l := range []string{"docker-swarm", "flannel-daemon"} {
		if err := testbed.CheckLayout(l); err != nil {
			t.Logf("%s left out: %v", l, err)
			continue
		}
		layouts = append(layouts, l)
	}
	if len(layouts) == 0 {
		t.Skip("neither daemon layout can be built here")
	}
	f := benchRun(t, online, name, "--layouts", strings.Join(layouts, ","), "--modes", "vanilla,falcon",
		"--workloads", "udp-stress:16", "--runs", "1", "--duration", "1s")
	if len(f.Results) != 2*len(layouts) {
		t.Fatalf("%d results, want %d", len(f.Results), 2*len(layouts))
	}
	for _, r := range f.Results {
		if len(r.Errors) > 0 || len(r.Runs) != 1 || r.Runs[0].PPS <= 0 || r.Baseline != r.Layout+"/vanilla" {
			t.Errorf("%s/%s: %d runs, errors %q, baseline %q", r.Layout, r.Mode, len(r.Runs), r.Errors, r.Baseline)
			continue
		}
		// Where falcon was during the window comes from its agent.
		fa := r.Runs[0].Falcon
		switch {
		case r.Mode == "vanilla" && fa != nil:
			t.Errorf("%s: vanilla has falcon activity %+v", r.Layout, fa)
		case r.Mode == "falcon" && (fa == nil || fa.OnPathPct < 0 || fa.OnPathPct > 100.5 || fa.EngagedPct > fa.OnPathPct+0.5):
			t.Errorf("%s: falcon's activity over the window: %+v", r.Layout, fa)
		}
	}
}

// TestBenchInterrupted cancels a bench mid-run, as ctrl-C does: the mode is
// undone, the testbed removed, and what was measured kept.
func TestBenchInterrupted(t *testing.T) {
	online, name := integration(t, "b")
	c, err := resolve(t, online, "--layouts", "docker", "--modes", "benchtest", "--workloads", "tcp:64K",
		"--runs", "2", "--duration", "5s")
	if err != nil {
		t.Fatal(err)
	}
	*testMode = benchtestMode{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Interrupt a second into the first run, whatever the setup took.
	w := &watch{on: "run 1/2", do: func() { time.AfterFunc(time.Second, cancel) }}
	f, err := Execute(ctx, c, RunOptions{TestbedName: name, Progress: NewProgress(w, true, false, 2, 0)})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("error %v, want interrupted", err)
	}
	if f == nil || !f.Interrupted || len(f.Results) != 1 || len(f.Results[0].Runs) != 0 {
		t.Fatalf("results after interrupt: %+v", f)
	}
	if testMode.setups != 1 || testMode.undos != 1 {
		t.Errorf("mode set up %d times, undone %d times; want 1 and 1", testMode.setups, testMode.undos)
	}
}

// watch calls do once the first time what is written to it contains on.
type watch struct {
	on   string
	do   func()
	once sync.Once
}

func (w *watch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.on) {
		w.once.Do(w.do)
	}
	return len(p), nil
}

// TestBenchOrderCheck: with --order-check every run of a TCP workload
// records the data segments that reached the servers' devices and how many
// came after one sent later: on the host layout (the NIC is the last
// device), and on docker with the server containers' ends, one flow per
// container. Through falcon+split and the fast path no segment may arrive
// out of its order, and the fast path's segments, which bpf_redirect_peer
// delivers past the tracepoint the stage tracer sits on, are counted all
// the same (at the devices' tc ingress); UDP runs carry no such count.
func TestBenchOrderCheck(t *testing.T) {
	online, name := integration(t, "o")
	f := benchRun(t, online, name, "--order-check", "--layouts", "host,docker", "--modes", splitModes(t, "vanilla,falcon+split,fastpath"),
		"--workloads", "tcp:128K,multi-flow-tcp:4K,udp:1400", "--flows", "2", "--containers", "flows", "--runs", "1", "--duration", "2s")
	if !f.Config.OrderCheck {
		t.Fatal("config lacks order_check")
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		var o *schema.TCPOrder
		if run.Reordering != nil {
			o = run.Reordering.Order
		}
		switch {
		case r.Workload == "udp" && o != nil:
			t.Errorf("%s: a UDP run has an order count %+v", what, o)
		case r.Workload == "udp":
		case o == nil:
			t.Errorf("%s: no order count", what)
		case o.Segments*1448 < int64(run.Gbps*1e9/8*run.WindowS)/2:
			t.Errorf("%s: %d segments counted for %.2f Gbit/s over %.1f s", what, o.Segments, run.Gbps, run.WindowS)
		case o.Reordered != 0:
			t.Errorf("%s: %d of %d segments reached the server after one sent later", what, o.Reordered, o.Segments)
		default:
			t.Logf("%s: %d segments, 0 reordered (TCPOFOQueue %d, %d retransmitted)", what, o.Segments,
				run.Reordering.OFOQueue, run.Reordering.Retrans)
		}
	})
}
