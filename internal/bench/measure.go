package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/internal/stagetrace"
	"github.com/falconnet/falcon/internal/stats"
	"github.com/falconnet/falcon/internal/testbed"
	"github.com/falconnet/falcon/internal/workload"
)

// env is one run of one case on a testbed.
type env struct {
	cfg              Config
	tb               *testbed.Testbed
	cs               Case
	clients, servers []testbed.Endpoint
	run              int
	activity         func() agent.Activity // the mode's agent, if it has one
	causes           func(uint64) []agent.CauseRecord
	cost             *stagetrace.CostTracer // with --stage-cost
	order            *stagetrace.Tracer     // with --order-check, over a TCP run
}

// traffic is what a workload starts: servers first, then clients that all
// run at once and return the tool's parsed result.
type traffic struct {
	servers []func(ctx context.Context) (workload.Server, error)
	clients []func(ctx context.Context) (any, error)
	// rx and tx are the namespaces whose SNMP counters are the receiving
	// and sending applications'.
	rx, tx []string
	// sent counts what a sender outside any namespace's counters sent
	// (the kernel sender), kept as tx.kernel.frames.
	sent func() (int64, error)
}

// Ports move with the run number so a run never meets the previous run's
// sockets (TIME_WAIT, a server slow to die).
func (e *env) port(base, flow int) int { return base + (e.run-1)*100 + flow }

func (e *env) senderCPU(i int) []int   { return []int{e.cfg.SenderCPUs[i%len(e.cfg.SenderCPUs)]} }
func (e *env) receiverCPU(i int) []int { return []int{e.cfg.ReceiverCPUs[i%len(e.cfg.ReceiverCPUs)]} }

// clientTime is how long clients run: warm-up, window and a tail, so the
// traffic is steady from before the window opens until after it closes.
// The window opens once all clients send, and many clients take longer to
// get going (16 iperf3 pairs on 2 CPUs overran the plain tail), so the tail
// grows with them.
func (e *env) clientTime() time.Duration {
	return time.Duration(e.cfg.Warmup+e.cfg.Duration) + tail + time.Duration(len(e.describe())-1)*tailPerClient
}

// tailPerClient is the tail's allowance for each client after the first.
const tailPerClient = 100 * time.Millisecond

// describe lists the client -> server pairs a run of the case uses, in the
// same round robin as the workloads below.
func (e *env) describe() []string {
	n, srv := 1, func(int) int { return 0 }
	switch w, _ := lookupWorkload(e.cs.Workload); {
	case e.cs.Workload == "udp-stress":
		n = e.cfg.Clients
	case e.cs.Workload == "memcached", e.cs.Workload == "web":
		n = 1 // its --flows are the threads of one memcaslap, or wrk's connections
	case w.flows:
		n, srv = e.cs.Flows, func(i int) int { return i }
	}
	var out []string
	if e.cfg.Sender == SenderKernel {
		h := e.tb.Hosts[0]
		if e.cs.Workload == "udp-stress" {
			n, srv = 1, func(int) int { return 0 }
		}
		for i := 0; i < n; i++ {
			s := e.servers[srv(i)%len(e.servers)]
			out = append(out, fmt.Sprintf("kernel sender on %s %s (CPU %d) -> %s %s (CPU %d)", h.Netns, h.NIC, e.senderCPU(0)[0],
				s.Netns, s.Addr, e.receiverCPU(i)[0]))
		}
		return out
	}
	for i := 0; i < n; i++ {
		c, s := e.clients[i%len(e.clients)], e.servers[srv(i)%len(e.servers)]
		out = append(out, fmt.Sprintf("%s %s (CPU %d) -> %s %s (CPU %d)", c.Netns, c.Addr, e.senderCPU(i)[0],
			s.Netns, s.Addr, e.receiverCPU(srv(i))[0]))
	}
	return out
}

func (e *env) measure(ctx context.Context) (Run, error) {
	waited, err := awaitReassembly(ctx, e.tb)
	if err != nil {
		return Run{}, err
	}
	run, err := e.measureNow(ctx)
	if waited >= reassemblyPoll {
		run.ReassemblyWaitS = waited.Seconds()
	}
	return run, err
}

func (e *env) measureNow(ctx context.Context) (Run, error) {
	if e.cfg.Sender == SenderKernel {
		return e.kernelUDP(ctx) // Plan let through only the workloads it drives
	}
	if e.cfg.OrderCheck && tcpWorkload(e.cs.Workload) {
		var err error
		if e.order, err = e.orderCheck(); err != nil {
			return Run{}, err
		}
		defer func() {
			e.order.Close()
			e.order = nil
		}()
	}
	run, err := e.drive(ctx)
	if err == nil && tcpWorkload(e.cs.Workload) {
		run.Reordering = tcpReorder(run.Counters, e.order != nil)
	}
	return run, err
}

// orderCheck starts the order check on every server's device (--order-check).
func (e *env) orderCheck() (*stagetrace.Tracer, error) {
	o := stagetrace.Options{Proto: 6}
	for _, s := range e.servers {
		o.Netns = appendUnique(o.Netns, s.Netns)
		o.Seq = append(o.Seq, stagetrace.Device{Netns: s.Netns, Name: s.Dev})
	}
	tr, err := stagetrace.Start(o)
	if err != nil {
		return nil, fmt.Errorf("--order-check: %w", err)
	}
	return tr, nil
}

// tcpWorkload says whether a workload's traffic is TCP.
func tcpWorkload(name string) bool {
	switch name {
	case "tcp", "multi-flow-tcp", "latency-tcp", "latency-load-tcp", "memcached", "web", "rates-tcp", "overload-latency-tcp", "hotspot-tcp":
		return true
	}
	return false
}

// drive runs the workload's driver.
func (e *env) drive(ctx context.Context) (Run, error) {
	switch e.cs.Workload {
	case "udp-stress":
		return e.udpStress(ctx)
	case "udp", "tcp", "multi-flow", "multi-flow-tcp":
		return e.iperf3(ctx)
	case "latency", "latency-tcp", "latency-load", "latency-load-tcp":
		return e.latency(ctx)
	case "memcached":
		return e.memcached(ctx)
	case "web":
		return e.web(ctx)
	case "overload-latency", "overload-latency-tcp":
		return e.overloadLatency(ctx)
	case "rates", "rates-tcp":
		return e.rates(ctx)
	case "hotspot", "hotspot-tcp":
		return e.hotspot(ctx)
	}
	return Run{}, fmt.Errorf("workload %q has no driver", e.cs.Workload)
}

// udpStress: K sockperf throughput clients into one UDP socket. Receiver
// packets/s is the receiving namespace's Udp InDatagrams over the window;
// loss compares it with the senders' OutDatagrams.
func (e *env) udpStress(ctx context.Context) (Run, error) {
	srv := e.servers[0]
	port := e.port(11111, 0)
	t := traffic{rx: []string{srv.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartSockperfServer(ctx, srv.Netns, srv.Addr, port, e.receiverCPU(0), false)
	})
	for i := 0; i < e.cfg.Clients; i++ {
		cl := e.clients[i%len(e.clients)]
		t.tx = appendUnique(t.tx, cl.Netns)
		opts := workload.SockperfOpts{Mode: "throughput", Netns: cl.Netns, Addr: srv.Addr, Port: port,
			Size: e.cs.Size, Duration: e.clientTime(), CPUs: e.senderCPU(i)}
		t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunSockperf(ctx, opts) })
	}
	run, _, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	udpReceived(&run, run.Counters["tx.Udp.OutDatagrams"])
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	return run, nil
}

// udpReceived sets a UDP run's packets/s, the receivers' datagrams over
// the window, and its loss against the sent ones.
func udpReceived(run *Run, sent int64) {
	rx := run.Counters["rx.Udp.InDatagrams"]
	run.PPS = float64(rx) / run.WindowS
	run.LossPct = lossPct(sent, rx)
}

// iperf3 drives udp, tcp and the multi-flow workloads: one iperf3 client
// and server per flow, flow i between the i-th client and server endpoint
// (round robin over containers). Packets/s are the receivers' UDP datagrams
// or TCP segments over the window; Gbit/s is iperf3's receiver rate.
func (e *env) iperf3(ctx context.Context) (Run, error) {
	udp := e.cs.Workload == "udp" || e.cs.Workload == "multi-flow"
	var t traffic
	var restarts atomic.Int32
	for i := 0; i < e.cs.Flows; i++ {
		srv, cl := e.servers[i%len(e.servers)], e.clients[i%len(e.clients)]
		port, i := e.port(5201, i), i
		t.rx, t.tx = appendUnique(t.rx, srv.Netns), appendUnique(t.tx, cl.Netns)
		t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
			return workload.StartIperf3Server(ctx, srv.Netns, port, e.receiverCPU(i))
		})
		opts := workload.Iperf3Opts{Netns: cl.Netns, Addr: srv.Addr, Port: port, UDP: udp, Size: e.cs.Size,
			Duration: e.clientTime(), CPUs: e.senderCPU(i)}
		t.clients = append(t.clients, func(ctx context.Context) (any, error) {
			return retrySetup(ctx, time.Duration(e.cfg.Warmup), &restarts, func(ctx context.Context) (any, error) {
				return workload.RunIperf3(ctx, opts)
			})
		})
	}
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	if n := restarts.Load(); n > 0 {
		run.SetupRetries = int(n)
	}
	var bps float64
	var ooo, retrans int64
	for _, x := range results {
		r := x.(workload.Iperf3Result)
		bps += r.BitsPerSecond
		ooo += r.OutOfOrder
		retrans += r.Retransmits
	}
	run.Gbps = bps / 1e9
	if udp {
		udpReceived(&run, run.Counters["tx.Udp.OutDatagrams"])
	} else {
		run.PPS = float64(run.Counters["rx.Tcp.InSegs"]) / run.WindowS
		// TCP does not lose data; what it lost on the way shows as
		// retransmitted segments, as a share of those sent.
		run.LossPct = lossPct(run.Counters["tx.Tcp.OutSegs"], run.Counters["tx.Tcp.OutSegs"]-run.Counters["tx.Tcp.RetransSegs"])
		ooo = run.Counters["rx.TcpExt.TCPOFOQueue"]
		run.Retransmits = &retrans
	}
	run.OutOfOrder = &ooo
	return run, nil
}

// setupAttempts is how often a client whose UDP stream's setup was lost
// is started in all.
const setupAttempts = 3

// retrySetup runs a client again when its UDP stream's setup datagram was
// lost (workload.ErrUDPSetupLost), as long as it failed within the
// warm-up of its first start: the window opens at the earliest a warm-up
// after traffic was seen, so the client started again sends through all of
// it. restarts counts the runs started again.
func retrySetup(ctx context.Context, warmup time.Duration, restarts *atomic.Int32, run func(context.Context) (any, error)) (any, error) {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		r, err := run(ctx)
		if !errors.Is(err, workload.ErrUDPSetupLost) || attempt == setupAttempts || time.Since(start) >= warmup || ctx.Err() != nil {
			return r, err
		}
		restarts.Add(1)
	}
}

// latency: one sockperf ping-pong (or under-load at --rate) client and
// server; packets/s is the messages per second the client sent (round
// trips for ping-pong).
func (e *env) latency(ctx context.Context) (Run, error) {
	srv, cl := e.servers[0], e.clients[0]
	tcp := tcpWorkload(e.cs.Workload)
	port := e.port(11211, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartSockperfServer(ctx, srv.Netns, srv.Addr, port, e.receiverCPU(0), tcp)
	})
	opts := workload.SockperfOpts{Mode: "ping-pong", Netns: cl.Netns, Addr: srv.Addr, Port: port, Size: e.cs.Size,
		Duration: e.clientTime(), TCP: tcp, CPUs: e.senderCPU(0)}
	if atRate(e.cs.Workload) {
		opts.Mode, opts.MPS = "under-load", e.cfg.Rate
	}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunSockperf(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	r := results[0].(workload.SockperfResult)
	run.Latency = &Latency{AvgUs: r.AvgUs, P50Us: r.P50Us, P90Us: r.P90Us, P99Us: r.P99Us, P999Us: r.P999Us, MaxUs: r.MaxUs}
	run.PPS = r.MsgPerSec
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	// under-load replies to a sample of messages only, so Sent vs Received
	// is no loss; sockperf counts the sampled messages that never came back.
	run.LossPct = lossPct(r.Observations+r.Dropped, r.Observations)
	run.OutOfOrder = &r.OutOfOrder
	return run, nil
}

// memcachedConns is the connections of one memcached client: FALCON's
// Fig. 18 ran up to 10 clients over 100 connections.
const memcachedConns = 10

// memcached: memcaslap in the first client container, --flows clients (its
// threads) of memcachedConns connections each, against memcached in the
// first server container (4 worker threads, as the paper's and memcached's
// default), values of the case's size. Both are multi-threaded: memcached
// runs on all the receiver CPUs, memcaslap on all the sender CPUs. Packets/s are the operations/s, and
// the latency is each operation's round trip, both as memcaslap reports
// them over its whole run: it has no warm-up of its own to leave out, and
// its run is the bench's warm-up, window and tail. Its percentiles are
// interpolated inside power-of-two buckets (workload.MemcaslapResult).
func (e *env) memcached(ctx context.Context) (Run, error) {
	srv, cl := e.servers[0], e.clients[0]
	port := e.port(13211, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartMemcachedServer(ctx, srv.Netns, srv.Addr, port, e.cfg.ReceiverCPUs, 4)
	})
	opts := workload.MemcaslapOpts{Netns: cl.Netns, Addr: srv.Addr, Port: port, Concurrency: memcachedConns * e.cs.Flows,
		Threads: e.cs.Flows, Size: e.cs.Size, Duration: e.clientTime(), CPUs: e.cfg.SenderCPUs}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunMemcaslap(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	r := results[0].(workload.MemcaslapResult)
	run.Latency = &Latency{AvgUs: r.AvgUs, P50Us: r.P50Us, P99Us: r.P99Us, MaxUs: r.MaxUs}
	run.PPS = r.OpsPerSec
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	return run, nil
}

func lossPct(sent, received int64) float64 {
	if sent <= 0 || received >= sent {
		return 0
	}
	return 100 * float64(sent-received) / float64(sent)
}

// window starts the servers, then all clients at once; after the warm-up it
// samples every counter, waits the window, samples again, and waits for the
// clients. Servers are stopped on every path.
func (e *env) window(ctx context.Context, t traffic) (Run, []any, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var srvs []workload.Server
	defer func() {
		for _, s := range srvs {
			s.Stop()
		}
	}()
	for _, start := range t.servers {
		s, err := start(ctx)
		if err != nil {
			return Run{}, nil, err
		}
		srvs = append(srvs, s)
	}
	type outcome struct {
		res  any
		err  error
		done time.Time
	}
	out := make([]outcome, len(t.clients))
	var wg sync.WaitGroup
	for i, c := range t.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c(ctx)
			out[i] = outcome{res, err, time.Now()}
			if err != nil {
				cancel() // one client failing spoils the run: stop the others
			}
		}()
	}
	// fail reports a client's own failure rather than the cancellation
	// it caused.
	fail := func(err error) (Run, []any, error) {
		cancel()
		wg.Wait()
		for i, o := range out {
			if o.err != nil && !errors.Is(o.err, context.Canceled) {
				return Run{}, nil, fmt.Errorf("client %d: %w", i, o.err)
			}
		}
		return Run{}, nil, err
	}
	started, err := e.awaitTraffic(ctx, t)
	if err != nil {
		return fail(err)
	}
	if err := sleep(ctx, time.Duration(e.cfg.Warmup)); err != nil {
		return fail(err)
	}
	before, err := e.sample(t)
	if err != nil {
		return fail(err)
	}
	if err := sleep(ctx, time.Duration(e.cfg.Duration)); err != nil {
		return fail(err)
	}
	after, err := e.sample(t)
	if err != nil {
		return fail(err)
	}
	wg.Wait()
	var results []any
	var raw []json.RawMessage
	for i, o := range out {
		if o.err != nil {
			return Run{}, nil, fmt.Errorf("client %d: %w", i, o.err)
		}
		if o.done.Before(after.at) {
			return Run{}, nil, fmt.Errorf("client %d stopped %s before the window closed, so the window saw it stop",
				i, after.at.Sub(o.done).Round(time.Millisecond))
		}
		results = append(results, o.res)
		b, err := json.Marshal(o.res)
		if err != nil {
			return Run{}, nil, err
		}
		raw = append(raw, b)
	}
	for _, s := range srvs {
		if err := s.Stop(); err != nil {
			return Run{}, nil, err
		}
	}
	srvs = nil
	run := Run{Started: started, WindowS: after.at.Sub(before.at).Seconds(), Tool: raw,
		CPU: procfs.Window(before.cpu, after.cpu), Counters: map[string]int64{}}
	run.BusyPct = cpuBusy(before.cpu, after.cpu, run.WindowS)
	for k, v := range after.counters {
		run.Counters[k] = v - before.counters[k]
	}
	run.BPF = bpfCosts(before.bpf, after.bpf)
	run.Falcon = falconActivity(before.falcon, after.falcon)
	if run.Falcon != nil && e.causes != nil {
		run.Falcon.Causes.Trace = causesWithin(e.causes(before.falcon.Causes.Last.Seq), after.falcon.Causes.Last.Seq)
	}
	if e.cost != nil {
		run.Stages = stageCosts(e.tb, after.cost.Sub(before.cost))
	}
	// An application sharing its namespace with a VXLAN device (the vxlan
	// layout) sees that device's encapsulated datagrams counted in Udp
	// InDatagrams too: the tunnel socket counts every packet it decaps.
	if ov := run.Counters["rx.overlay.packets"]; ov > 0 {
		run.Counters["rx.Udp.InDatagrams"] = max(0, run.Counters["rx.Udp.InDatagrams"]-ov)
	}
	if run.WindowS <= 0 {
		return Run{}, nil, fmt.Errorf("empty measurement window")
	}
	return run, results, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Traffic counts as flowing once the packet counters of the clients' and
// servers' namespaces grew in every poll for trafficSteady: the tools
// start at their own pace (sockperf spends two seconds in a warm-up stage
// that sends a handful of messages and then waits), so the warm-up and the
// window are timed from the first steady traffic, not from the launch.
// (A burst, or a few packets held up by ARP on the overlay, does not
// last 200 ms.)
// It is timed, not a count of polls: reading the counters of every
// namespace takes time of its own, much of it under emulation, and the
// clients' tail pays for every poll.
const (
	trafficPoll    = 25 * time.Millisecond
	trafficSteady  = 200 * time.Millisecond
	trafficTimeout = 15 * time.Second
)

func (e *env) awaitTraffic(ctx context.Context, t traffic) (time.Time, error) {
	count := func() (int64, error) {
		var n int64
		for _, ns := range append(append([]string{}, t.rx...), t.tx...) {
			s, err := procfs.ReadSNMP(ns)
			if err != nil {
				return 0, fmt.Errorf("counters of %s: %w", ns, err)
			}
			n += s.UDP("InDatagrams") + s.UDP("OutDatagrams") + s["Tcp"]["InSegs"] + s["Tcp"]["OutSegs"]
		}
		return n, nil
	}
	last, err := count()
	if err != nil {
		return time.Time{}, err
	}
	deadline := time.Now().Add(trafficTimeout)
	// since: the poll from which the counters grew at every poll.
	var since time.Time
	for at := time.Now(); ; {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no traffic between the clients and servers within %s", trafficTimeout)
		}
		if err := sleep(ctx, trafficPoll); err != nil {
			return time.Time{}, err
		}
		n, err := count()
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		switch {
		case n <= last:
			since = time.Time{}
		case since.IsZero():
			since = at
		}
		if !since.IsZero() && now.Sub(since) >= trafficSteady {
			return now.UTC(), nil
		}
		last, at = n, now
	}
}

// sample is every counter at one end of the window.
type sample struct {
	at       time.Time
	cpu      procfs.Snapshot
	counters map[string]int64
	bpf      map[string]datapath.ProgStats // with --bpf-stats
	cost     stagetrace.CostSnapshot       // with --stage-cost
	falcon   agent.Activity
}

// counterKeys are the SNMP and netstat counters kept per run, for the
// receiving ("rx.") and sending ("tx.") applications' namespaces. The
// TcpExt ones are what reordering cost TCP (TCPReorder says what each
// counts); a counter this kernel lacks reads 0.
var counterKeys = map[string][][2]string{
	"rx": {{"Udp", "InDatagrams"}, {"Udp", "InErrors"}, {"Udp", "RcvbufErrors"}, {"Udp", "NoPorts"},
		{"Tcp", "InSegs"}, {"Tcp", "InErrs"}, {"TcpExt", "TCPOFOQueue"}, {"TcpExt", "TCPOFODrop"}, {"TcpExt", "TCPOFOMerge"}},
	"tx": {{"Udp", "OutDatagrams"}, {"Udp", "SndbufErrors"}, {"Tcp", "OutSegs"}, {"Tcp", "RetransSegs"},
		{"TcpExt", "TCPSACKReorder"}, {"TcpExt", "TCPTSReorder"}, {"TcpExt", "TCPDSACKRecv"}, {"TcpExt", "TCPDSACKOfoRecv"},
		{"TcpExt", "TCPDSACKRecvSegs"}, {"TcpExt", "TCPSpuriousRTOs"}, {"TcpExt", "TCPLostRetransmit"}},
}

func (e *env) sample(t traffic) (sample, error) {
	s := sample{at: time.Now(), counters: map[string]int64{}}
	if e.activity != nil {
		s.falcon = e.activity()
	}
	var err error
	if s.cpu, err = procfs.TakeSnapshot(); err != nil {
		return s, err
	}
	if e.cost != nil {
		if s.cost, err = e.cost.Snapshot(); err != nil {
			return s, err
		}
	}
	if e.order != nil {
		order, err := e.order.Reordering()
		if err != nil {
			return s, err
		}
		for _, o := range order {
			s.counters["rx.order.segments"] += int64(o.Seen)
			s.counters["rx.order.reordered"] += int64(o.Reordered)
		}
	}
	if e.cfg.BPFStats {
		if s.bpf, err = datapath.ReadProgramStats(); err != nil {
			return s, err
		}
	}
	for role, nss := range map[string][]string{"rx": t.rx, "tx": t.tx} {
		for _, ns := range nss {
			snmp, err := procfs.ReadSNMP(ns)
			if err != nil {
				return s, fmt.Errorf("counters of %s: %w", ns, err)
			}
			for _, k := range counterKeys[role] {
				v := snmp[k[0]][k[1]]
				if k[0] == "Udp" {
					v = snmp.UDP(k[1]) // "Udp" keys count IPv4 and IPv6
				}
				s.counters[role+"."+k[0]+"."+k[1]] += v
			}
		}
	}
	if t.sent != nil {
		n, err := t.sent()
		if err != nil {
			return s, fmt.Errorf("frames the kernel sender sent: %w", err)
		}
		s.counters["tx.kernel.frames"] = n
	}
	for _, h := range e.tb.Hosts {
		if h.Overlay == "" || !contains(t.rx, h.Netns) {
			continue
		}
		devs, err := readNetDev(h.Netns)
		if err != nil {
			return s, err
		}
		d := devs[h.Overlay]
		s.counters["rx.overlay.packets"] += int64(d.RxPackets + d.RxDropped)
	}
	return s, nil
}

func statsOf(x float64) stats.Summary { return stats.Summary{Mean: x, N: 1} }

func sortedCPUs(m map[int]procfs.CPUWindow) []int {
	var out []int
	for c := range m {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// bpfCosts is what each falcon program did over the window.
func bpfCosts(before, after map[string]datapath.ProgStats) map[string]BPFCost {
	if len(after) == 0 {
		return nil
	}
	out := map[string]BPFCost{}
	for name, a := range after {
		b := before[name]
		if a.RunCount < b.RunCount || a.RunTime < b.RunTime {
			// The program was detached and loaded again inside the window
			// (falcon stood down and came back): the counters restarted, and
			// only the new instance's runs are known.
			b = datapath.ProgStats{}
		}
		c := BPFCost{Runs: a.RunCount - b.RunCount, TimeNs: uint64(a.RunTime - b.RunTime)}
		if c.Runs > 0 {
			c.NsPerRun = float64(c.TimeNs) / float64(c.Runs)
		}
		out[name] = c
	}
	return out
}
