package measure

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/falconnet/falcon/lab/probes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// overload-latency is FALCON's Fig. 12 (c), UDP latency "overloaded":
// each case at its maximum rate before drops (overload-latency-tcp its
// Fig. 12 (d) and MFLOW's overloaded TCP latency). A run first searches for
// that rate with the very traffic whose latency it then measures (sockperf
// under-load, messages of the case's size sent at --mps, the server
// answering one in 100), so that the rate found is where this sender's
// traffic starts to be dropped, pacing and all:
//
//  1. one step flat out (sockperf throughput, no --mps) bounds the search:
//     where the receiver kept up with everything sent, the sender is the
//     limit and that is the rate;
//  2. otherwise a step at the rate the receiver delivered flat out, then
//     up while steps pass and bisection from the first that fails, until
//     the bracket is within overloadPrecision of its top;
//  3. the case's measurement proper: sockperf under-load at the highest
//     rate that passed, with the bench's warm-up and window, as
//     latency-load runs at --rate.
//
// A step is one sockperf client of overloadStep; it passes when the
// sending container's Udp OutDatagrams and the receiving one's Udp
// InDatagrams over the step (read before it starts and after the last
// datagram could arrive) differ by at most overloadMaxLossPct, so a lone
// drop on a shared machine does not end the search. TCP drops nothing the
// application sees: there a step passes when the sender reached the target
// (overloadSenderShort; short of it, the receiver pushed back) with at most
// overloadMaxLossPct of its segments retransmitted (Tcp RetransSegs
// against OutSegs), and the flat-out step only bounds the search. Each
// step's counters,
// sockperf's own send rate and its latency percentiles are kept
// (Run.Overload): latency against rate up to the knee, for free.
const (
	overloadClimb    = 0.1 // the first climb above a rate that passed, as its share
	overloadMaxSteps = 10  // bisection steps, after the flat-out one
	// A step whose sender reached less than this share of its target
	// measured a lower rate than it names: the sender is the limit there.
	overloadSenderShort = 0.95
	// overloadSettle is how long after a step's client exits its
	// counters are read: what was still queued is delivered or dropped.
	overloadSettle = 100 * time.Millisecond
)

func init() { drivers[workload.DriverOverload] = (*env).overloadLatency }

// overloadLatency runs the search and then the window at the rate found.
func (e *env) overloadLatency(ctx context.Context) (schema.Run, error) {
	srv, cl := e.servers[0], e.clients[0]
	tcp := e.w.TCP
	search, err := e.overloadSearch(ctx, srv.Netns, srv.Addr, cl.Netns, e.port(11411, 50), tcp)
	if err != nil {
		return schema.Run{}, fmt.Errorf("searching the highest rate without drops: %w", err)
	}
	port := e.port(11411, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartSockperfServer(ctx, srv.Netns, srv.Addr, port, e.receiverCPU(0), tcp)
	})
	opts := workload.SockperfOpts{Mode: "under-load", Netns: cl.Netns, Addr: srv.Addr, Port: port, Size: e.cs.Size,
		Duration: e.clientTime(), MPS: int(math.Round(search.RatePPS)), TCP: tcp, CPUs: e.senderCPU(0)}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunSockperf(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, fmt.Errorf("at the rate found, %.0f messages/s (steps: %s): %w", search.RatePPS, stepsLine(search.Steps), err)
	}
	r := results[0].(workload.SockperfResult)
	run.Latency = &schema.Latency{AvgUs: r.AvgUs, P50Us: r.P50Us, P90Us: r.P90Us, P99Us: r.P99Us, P999Us: r.P999Us, MaxUs: r.MaxUs}
	// Packets/s are the messages sent over the window (sockperf's rate):
	// the rate found, as the window saw it held; loss is the window's own,
	// datagrams not received or TCP segments retransmitted.
	run.PPS = r.MsgPerSec
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	if tcp {
		run.LossPct = lossPct(run.Counters["tx.Tcp.OutSegs"], run.Counters["tx.Tcp.OutSegs"]-run.Counters["tx.Tcp.RetransSegs"])
	} else {
		run.LossPct = lossPct(run.Counters["tx.Udp.OutDatagrams"], run.Counters["rx.Udp.InDatagrams"])
	}
	run.OutOfOrder = &r.OutOfOrder
	run.Overload = &search
	return run, nil
}

// overloadSearch finds the highest rate without drops on its own sockperf
// server, stopped before it returns.
func (e *env) overloadSearch(ctx context.Context, srvNS, addr, clNS string, port int, tcp bool) (schema.OverloadSearch, error) {
	server, err := workload.StartSockperfServer(ctx, srvNS, addr, port, e.receiverCPU(0), tcp)
	if err != nil {
		return schema.OverloadSearch{StepS: schema.OverloadStepTime.Seconds()}, err
	}
	defer server.Stop()
	s, err := searchRate(func(target float64) (schema.OverloadStep, error) {
		return e.overloadStep(ctx, srvNS, addr, clNS, port, target, tcp)
	}, tcp)
	if err != nil {
		return s, err
	}
	return s, server.Stop()
}

// searchRate is the search itself: step runs one step at a target rate
// (0: flat out).
func searchRate(step func(target float64) (schema.OverloadStep, error), tcp bool) (schema.OverloadSearch, error) {
	s := schema.OverloadSearch{MaxLossPct: schema.OverloadMaxLossPct, StepS: schema.OverloadStepTime.Seconds()}
	run := func(target float64) (schema.OverloadStep, error) {
		st, err := step(target)
		if err == nil {
			s.Steps = append(s.Steps, st)
		}
		return st, err
	}
	flat, err := run(0)
	if err != nil {
		return s, err
	}
	if flat.SentPPS < workload.MinRatePPS {
		return s, fmt.Errorf("flat out sockperf sent %.0f messages/s (%d datagrams or segments in the step), too few to search under", flat.SentPPS, flat.Sent)
	}
	if flat.Pass && !tcp {
		s.RatePPS, s.SenderLimited = flat.SentPPS, true
		return s, nil
	}
	// The flat-out rate bounds the search from above. The receiver's share
	// of it (TCP: all of it) is probed first. While steps pass the rate
	// climbs, by 10 % of that first rate and then by twice the last climb
	// each step (a receiver that collapses when flooded takes more when
	// paced); from the first step that fails, the bracket is halved.
	lo, hi := 0.0, flat.SentPPS
	target := hi
	if !tcp && flat.Sent > 0 {
		target *= float64(flat.Received) / float64(flat.Sent)
	}
	climb, failed := overloadClimb*target, false
	for i := 0; i < overloadMaxSteps && target >= workload.MinRatePPS; i++ {
		st, err := run(target)
		if err != nil {
			return s, err
		}
		short := st.SentPPS < overloadSenderShort*target
		switch {
		case tcp:
			// Short of the target, the receiver pushed back: the step
			// failed (overloadStep).
			if st.Pass {
				lo = target
			} else {
				hi = target
			}
		case st.Pass && short:
			// The sender fell short of the target and the receiver
			// kept up: no higher rate can be sent either.
			lo, s.SenderLimited = st.SentPPS, true
		case st.Pass:
			lo = target
		case short:
			hi = max(st.SentPPS, lo) // dropped at the rate actually sent
		default:
			hi = target
		}
		failed = failed || !st.Pass
		if s.SenderLimited || hi-lo <= schema.OverloadPrecision*hi {
			break
		}
		if failed {
			target = (lo + hi) / 2
		} else {
			target, climb = min(lo+climb, hi), 2*climb
		}
	}
	if lo <= 0 {
		return s, fmt.Errorf("no rate passed (more than %g %% lost or retransmitted, or the sender short of it) down to %.0f/s (steps: %s)",
			schema.OverloadMaxLossPct, lowestTarget(s.Steps), stepsLine(s.Steps))
	}
	s.RatePPS = lo
	return s, nil
}

func lowestTarget(steps []schema.OverloadStep) float64 {
	low := 0.0
	for _, st := range steps {
		if st.TargetPPS > 0 && (low == 0 || st.TargetPPS < low) {
			low = st.TargetPPS
		}
	}
	return low
}

func stepsLine(steps []schema.OverloadStep) string {
	s := ""
	for i, st := range steps {
		if i > 0 {
			s += ", "
		}
		if st.TargetPPS > 0 {
			s += fmt.Sprintf("%.0f/s", st.TargetPPS)
		} else {
			s += "flat out"
		}
		s += fmt.Sprintf(" sent %.0f/s, %.2f%% lost", st.SentPPS, st.LossPct)
	}
	return s
}

// overloadStep runs one sockperf client at target messages/s (0: flat
// out, in throughput mode) and reads what the receiver got of it.
func (e *env) overloadStep(ctx context.Context, srvNS, addr, clNS string, port int, target float64, tcp bool) (schema.OverloadStep, error) {
	p := e.probes(traffic{rx: []string{srvNS}, tx: []string{clNS}})
	opts := workload.SockperfOpts{Mode: "under-load", Netns: clNS, Addr: addr, Port: port, Size: e.cs.Size,
		Duration: schema.OverloadStepTime, MPS: int(math.Round(target)), TCP: tcp, CPUs: e.senderCPU(0)}
	if target == 0 {
		opts.Mode = "throughput"
	}
	before, err := p.Sample()
	if err != nil {
		return schema.OverloadStep{}, err
	}
	r, err := workload.RunSockperf(ctx, opts)
	if err != nil {
		return schema.OverloadStep{}, err
	}
	if err := probes.Wait(ctx, overloadSettle); err != nil {
		return schema.OverloadStep{}, err
	}
	after, err := p.Sample()
	if err != nil {
		return schema.OverloadStep{}, err
	}
	d := func(k string) int64 { return after.Counters[k] - before.Counters[k] }
	st := schema.OverloadStep{Mode: opts.Mode, TargetPPS: target, SentPPS: r.MsgPerSec, Sent: d("tx.Udp.OutDatagrams"),
		Received: max(0, d("rx.Udp.InDatagrams")-d("rx.overlay.packets")), RcvbufErrors: d("rx.Udp.RcvbufErrors")}
	if tcp {
		st.Sent, st.Received, st.Retransmitted = d("tx.Tcp.OutSegs"), d("rx.Tcp.InSegs"), d("tx.Tcp.RetransSegs")
	}
	st.SoftnetDropped = probes.SoftnetDropped(before, after)
	if st.Sent <= 0 {
		return st, fmt.Errorf("sockperf sent nothing at %.0f messages/s", target)
	}
	if tcp {
		st.LossPct = lossPct(st.Sent, st.Sent-st.Retransmitted)
		st.Pass = st.LossPct <= schema.OverloadMaxLossPct && (target == 0 || st.SentPPS >= overloadSenderShort*target)
	} else {
		st.LossPct = lossPct(st.Sent, st.Received)
		st.Pass = st.LossPct <= schema.OverloadMaxLossPct
	}
	if opts.Mode == "under-load" {
		st.P50Us, st.P99Us = r.P50Us, r.P99Us
	}
	return st, nil
}
