package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/stats"
	"github.com/falconnet/falcon/lab/workload"
)

// window starts the servers, then all clients at once; after the warm-up it
// samples every counter, waits the window, samples again, and waits for the
// clients. Servers are stopped on every path.
func (e *env) window(ctx context.Context, t traffic) (schema.Run, []any, error) {
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
			return schema.Run{}, nil, err
		}
		srvs = append(srvs, s)
	}
	cl := startClients(ctx, cancel, t.clients)
	started, before, after, err := e.measureWindow(ctx, t)
	if err != nil {
		return schema.Run{}, nil, cl.fail(err)
	}
	cl.wg.Wait()
	results, raw, err := cl.results(after.at)
	if err != nil {
		return schema.Run{}, nil, err
	}
	for _, s := range srvs {
		if err := s.Stop(); err != nil {
			return schema.Run{}, nil, err
		}
	}
	srvs = nil
	run := e.windowRun(before, after)
	run.Started, run.Tool = started, raw
	if run.WindowS <= 0 {
		return schema.Run{}, nil, fmt.Errorf("empty measurement window")
	}
	return run, results, nil
}

// measureWindow waits for the traffic and the warm-up, and samples the
// counters at both ends of the window.
func (e *env) measureWindow(ctx context.Context, t traffic) (started time.Time, before, after sample, err error) {
	if started, err = e.awaitTraffic(ctx, t); err != nil {
		return
	}
	if err = sleep(ctx, time.Duration(e.cfg.Warmup)); err != nil {
		return
	}
	if before, err = e.sample(t); err != nil {
		return
	}
	if err = sleep(ctx, time.Duration(e.cfg.Duration)); err != nil {
		return
	}
	after, err = e.sample(t)
	return
}

// clientRuns are a window's clients, running.
type clientRuns struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	out    []clientOutcome
}

type clientOutcome struct {
	res  any
	err  error
	done time.Time
}

// startClients runs every client at once; one failing spoils the run and
// stops the others.
func startClients(ctx context.Context, cancel context.CancelFunc, clients []func(ctx context.Context) (any, error)) *clientRuns {
	cl := &clientRuns{cancel: cancel, out: make([]clientOutcome, len(clients))}
	for i, c := range clients {
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			res, err := c(ctx)
			cl.out[i] = clientOutcome{res, err, time.Now()}
			if err != nil {
				cancel()
			}
		}()
	}
	return cl
}

// fail stops the clients and reports a client's own failure rather than
// the cancellation it caused, else err.
func (cl *clientRuns) fail(err error) error {
	cl.cancel()
	cl.wg.Wait()
	for i, o := range cl.out {
		if o.err != nil && !errors.Is(o.err, context.Canceled) {
			return fmt.Errorf("client %d: %w", i, o.err)
		}
	}
	return err
}

// results are the finished clients' results, parsed and as JSON; a client
// that failed, or stopped before the window closed at end, spoils them.
func (cl *clientRuns) results(end time.Time) ([]any, []json.RawMessage, error) {
	var results []any
	var raw []json.RawMessage
	for i, o := range cl.out {
		if o.err != nil {
			return nil, nil, fmt.Errorf("client %d: %w", i, o.err)
		}
		if o.done.Before(end) {
			return nil, nil, fmt.Errorf("client %d stopped %s before the window closed, so the window saw it stop",
				i, end.Sub(o.done).Round(time.Millisecond))
		}
		results = append(results, o.res)
		b, err := json.Marshal(o.res)
		if err != nil {
			return nil, nil, err
		}
		raw = append(raw, b)
	}
	return results, raw, nil
}

// windowRun is what the counters say of the window between two samples.
func (e *env) windowRun(before, after sample) schema.Run {
	run := schema.Run{WindowS: after.at.Sub(before.at).Seconds(),
		CPU: procfs.Window(before.cpu, after.cpu), Counters: map[string]int64{}}
	run.BusyPct = cpuBusy(before.cpu, after.cpu, run.WindowS)
	for k, v := range after.counters {
		run.Counters[k] = v - before.counters[k]
	}
	run.BPF = bpfCosts(before.bpf, after.bpf)
	run.Falcon = e.mode.Between(before.falcon, after.falcon)
	if e.cost != nil {
		run.Stages = stageCosts(e.tb, after.cost.Sub(before.cost))
	}
	// An application sharing its namespace with a VXLAN device (the vxlan
	// layout) sees that device's encapsulated datagrams counted in Udp
	// InDatagrams too: the tunnel socket counts every packet it decaps.
	if ov := run.Counters["rx.overlay.packets"]; ov > 0 {
		run.Counters["rx.Udp.InDatagrams"] = max(0, run.Counters["rx.Udp.InDatagrams"]-ov)
	}
	return run
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
	falcon   modes.Reading
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
	s.falcon = e.mode.Read()
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
func bpfCosts(before, after map[string]datapath.ProgStats) map[string]schema.BPFCost {
	if len(after) == 0 {
		return nil
	}
	out := map[string]schema.BPFCost{}
	for name, a := range after {
		b := before[name]
		if a.RunCount < b.RunCount || a.RunTime < b.RunTime {
			// The program was detached and loaded again inside the window
			// (falcon stood down and came back): the counters restarted, and
			// only the new instance's runs are known.
			b = datapath.ProgStats{}
		}
		c := schema.BPFCost{Runs: a.RunCount - b.RunCount, TimeNs: uint64(a.RunTime - b.RunTime)}
		if c.Runs > 0 {
			c.NsPerRun = float64(c.TimeNs) / float64(c.Runs)
		}
		out[name] = c
	}
	return out
}
