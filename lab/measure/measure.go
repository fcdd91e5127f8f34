// Package measure runs one run of one case of a bench on a testbed, under
// a mode already set up: it starts the workload's servers and clients
// (lab/workload, or the kernel sender of lab/xdpsend), waits for steady
// traffic and the warm-up, reads the counters at both ends of the window
// (lab/probes) and what the mode's agent did (lab/modes), and returns the
// run's record. Each workload's driver is here: udp-stress, iperf3's,
// sockperf's latency, memcached, web, rates, hotspot, overload-latency.
package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/probes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// Run is one run of one case on a testbed, under a mode in force there.
type Run struct {
	Config           schema.Config
	Testbed          *testbed.Testbed
	Case             Case
	Clients, Servers []testbed.Endpoint // the testbed's (Testbed.Endpoints)
	N                int                // the run's number, from 1
	Mode             modes.SetUp
	Instruments      *Instruments // the bench's, started once (Start)
}

func (r Run) env() *env {
	w, _ := workload.Lookup(r.Case.Workload)
	e := &env{cfg: r.Config, tb: r.Testbed, cs: r.Case, w: w, clients: r.Clients, servers: r.Servers, run: r.N, mode: r.Mode}
	if r.Instruments != nil {
		e.cost = r.Instruments.cost
	}
	return e
}

// Measure measures the run: first waiting until no namespace of the
// testbed holds fragments of the run before (probes.AwaitReassembly).
func Measure(ctx context.Context, r Run) (schema.Run, error) { return r.env().measure(ctx) }

// Endpoints lists the client -> server pairs the run uses, with their CPUs
// (Result.Endpoints).
func Endpoints(r Run) []string { return r.env().describe() }

// env is one run of one case on a testbed.
type env struct {
	cfg              schema.Config
	tb               *testbed.Testbed
	cs               Case
	w                workload.Kind // the case's workload
	clients, servers []testbed.Endpoint
	run              int
	mode             modes.SetUp        // the mode in force, read around every window
	cost             *probes.StageCost  // with --stage-cost
	order            *probes.OrderCheck // with --order-check, over a TCP run
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

// between counts a server's namespace with the receiving and a client's
// with the sending applications', each once.
func (t *traffic) between(rx, tx string) {
	if !slices.Contains(t.rx, rx) {
		t.rx = append(t.rx, rx)
	}
	if !slices.Contains(t.tx, tx) {
		t.tx = append(t.tx, tx)
	}
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
	return time.Duration(e.cfg.Warmup+e.cfg.Duration) + Tail + time.Duration(len(e.describe())-1)*tailPerClient
}

// tailPerClient is the tail's allowance for each client after the first.
const tailPerClient = 100 * time.Millisecond

// describe lists the client -> server pairs a run of the case uses, in the
// same round robin as the workloads below.
func (e *env) describe() []string {
	n, srv := 1, func(int) int { return 0 }
	switch e.w.Pairs {
	case workload.ClientsToOne:
		n = e.cfg.Clients
	case workload.PairPerFlow:
		n, srv = e.cs.Flows, func(i int) int { return i }
	}
	var out []string
	if e.cfg.Sender == schema.SenderKernel {
		h := e.tb.Hosts[0]
		if e.w.Pairs == workload.ClientsToOne {
			n, srv = 1, func(int) int { return 0 } // one sender's flows into the one server
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

func (e *env) measure(ctx context.Context) (schema.Run, error) {
	waited, err := probes.AwaitReassembly(ctx, e.tb)
	if err != nil {
		return schema.Run{}, err
	}
	run, err := e.measureNow(ctx)
	if waited >= probes.ReassemblyPoll {
		run.ReassemblyWaitS = waited.Seconds()
	}
	return run, err
}

func (e *env) measureNow(ctx context.Context) (schema.Run, error) {
	if e.cfg.Sender == schema.SenderKernel {
		return e.kernelUDP(ctx) // bench.Plan let through only the workloads it drives
	}
	if e.cfg.OrderCheck && e.w.TCP {
		var err error
		if e.order, err = probes.StartOrderCheck(e.servers); err != nil {
			return schema.Run{}, err
		}
		defer func() {
			e.order.Close()
			e.order = nil
		}()
	}
	run, err := e.drive(ctx)
	if err == nil && e.w.TCP {
		run.Reordering = probes.TCPReorder(run.Counters, e.order != nil)
	}
	return run, err
}

// drivers are the workloads' drivers, by the catalogue's names for them
// (workload.Kind.Driver); each file of a driver adds its own.
var drivers = map[workload.Driver]func(e *env, ctx context.Context) (schema.Run, error){
	workload.DriverStress:   (*env).udpStress,
	workload.DriverIperf3:   (*env).iperf3,
	workload.DriverLatency:  (*env).latency,
	workload.DriverMemcache: (*env).memcached,
}

// drive runs the workload's driver.
func (e *env) drive(ctx context.Context) (schema.Run, error) {
	d := drivers[e.w.Driver]
	if d == nil {
		return schema.Run{}, fmt.Errorf("workload %q has no driver", e.cs.Workload)
	}
	return d(e, ctx)
}

// udpStress: K sockperf throughput clients into one UDP socket. Receiver
// packets/s is the receiving namespace's Udp InDatagrams over the window;
// loss compares it with the senders' OutDatagrams.
func (e *env) udpStress(ctx context.Context) (schema.Run, error) {
	srv := e.servers[0]
	port := e.port(11111, 0)
	t := traffic{rx: []string{srv.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartSockperfServer(ctx, srv.Netns, srv.Addr, port, e.receiverCPU(0), false)
	})
	for i := 0; i < e.cfg.Clients; i++ {
		cl := e.clients[i%len(e.clients)]
		if !slices.Contains(t.tx, cl.Netns) {
			t.tx = append(t.tx, cl.Netns)
		}
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
func udpReceived(run *schema.Run, sent int64) {
	rx := run.Counters["rx.Udp.InDatagrams"]
	run.PPS = float64(rx) / run.WindowS
	run.LossPct = lossPct(sent, rx)
}

// iperf3 drives udp, tcp and the multi-flow workloads: one iperf3 client
// and server per flow, flow i between the i-th client and server endpoint
// (round robin over containers). Packets/s are the receivers' UDP datagrams
// or TCP segments over the window; Gbit/s is iperf3's receiver rate.
func (e *env) iperf3(ctx context.Context) (schema.Run, error) {
	udp := !e.w.TCP
	var t traffic
	var restarts atomic.Int32
	for i := 0; i < e.cs.Flows; i++ {
		srv, cl := e.servers[i%len(e.servers)], e.clients[i%len(e.clients)]
		port, i := e.port(5201, i), i
		t.between(srv.Netns, cl.Netns)
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
func (e *env) latency(ctx context.Context) (schema.Run, error) {
	srv, cl := e.servers[0], e.clients[0]
	tcp := e.w.TCP
	port := e.port(11211, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartSockperfServer(ctx, srv.Netns, srv.Addr, port, e.receiverCPU(0), tcp)
	})
	opts := workload.SockperfOpts{Mode: "ping-pong", Netns: cl.Netns, Addr: srv.Addr, Port: port, Size: e.cs.Size,
		Duration: e.clientTime(), TCP: tcp, CPUs: e.senderCPU(0)}
	if e.w.Rate {
		opts.Mode, opts.MPS = "under-load", e.cfg.Rate
	}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunSockperf(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	r := results[0].(workload.SockperfResult)
	run.Latency = &schema.Latency{AvgUs: r.AvgUs, P50Us: r.P50Us, P90Us: r.P90Us, P99Us: r.P99Us, P999Us: r.P999Us, MaxUs: r.MaxUs}
	run.PPS = r.MsgPerSec
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	// under-load replies to a sample of messages only, so Sent vs Received
	// is no loss; sockperf counts the sampled messages that never came back.
	run.LossPct = lossPct(r.Observations+r.Dropped, r.Observations)
	run.OutOfOrder = &r.OutOfOrder
	return run, nil
}

// memcached: memcaslap in the first client container, --flows clients (its
// threads) of memcachedConns connections each, against memcached in the
// first server container (4 worker threads, as the paper's and memcached's
// default), values of the case's size. Both are multi-threaded: memcached
// runs on all the receiver CPUs, memcaslap on all the sender CPUs. Packets/s are the operations/s, and
// the latency is each operation's round trip, both as memcaslap reports
// them over its whole run: it has no warm-up of its own to leave out, and
// its run is the bench's warm-up, window and tail. Its percentiles are
// interpolated inside power-of-two buckets (workload.MemcaslapResult).
func (e *env) memcached(ctx context.Context) (schema.Run, error) {
	srv, cl := e.servers[0], e.clients[0]
	port := e.port(13211, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartMemcachedServer(ctx, srv.Netns, srv.Addr, port, e.cfg.ReceiverCPUs, 4)
	})
	opts := workload.MemcaslapOpts{Netns: cl.Netns, Addr: srv.Addr, Port: port, Concurrency: workload.MemcachedConns * e.cs.Flows,
		Threads: e.cs.Flows, Size: e.cs.Size, Duration: e.clientTime(), CPUs: e.cfg.SenderCPUs}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunMemcaslap(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	r := results[0].(workload.MemcaslapResult)
	run.Latency = &schema.Latency{AvgUs: r.AvgUs, P50Us: r.P50Us, P99Us: r.P99Us, MaxUs: r.MaxUs}
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

// Case is one cell of the matrix: what runs --runs times on one testbed.
type Case struct {
	Layout, Mode, Workload string
	Size, Flows            int
	Rate                   string // the rates workloads' rate (a --rates entry)
}

func (c Case) String() string {
	s := fmt.Sprintf("%s/%s %s %s", c.Layout, c.Mode, c.Workload, workload.FormatSize(c.Size))
	if c.Flows > 1 {
		s += fmt.Sprintf(" ×%d", c.Flows)
	}
	if c.Rate != "" {
		s += " at " + c.Rate
	}
	return s
}

// Tail keeps the clients sending a little past the window, so the window
// never sees them stop. The window opens only after probes.TrafficSteady of
// steady traffic, and the tools' own start and the closing sample come on
// top of that: half a second for those (with 300 ms, a client stopped
// 33 ms early on the host and 1 ms early in the 6.1 guest under emulation).
const Tail = probes.TrafficSteady + 500*time.Millisecond
