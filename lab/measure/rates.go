package measure

import (
	"context"
	"math"
	"strconv"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// The rates workloads (FALCON Fig. 19: UDP and TCP at fixed rates, total
// CPU and softirqs): one iperf3 flow held to each rate of --rates by
// iperf3's own pacing (-b), so that every mode carries the same offered
// load and what differs between them is what receiving it cost. Each rate
// is a case of its own (Case.Rate, Result.Offered); a run records the
// delivered rate, the loss and, as every run does, each CPU's usr, sys,
// softirq and irq time over the window from /proc/stat (Run.CPU), which
// Metrics sums into cpu_total_*.
//
// On one machine the sending container's CPU is in those totals too; at a
// fixed rate the sender's work is the same in every mode, so a difference
// between modes is the receiving side's.

func init() { drivers[workload.DriverRates] = (*env).rates }

// rates: one iperf3 flow, UDP (rates) or TCP (rates-tcp), held to the
// case's rate. Packets/s are the receiver's datagrams (TCP: segments after
// GRO) over the window, Gbit/s iperf3's receiver rate; loss as udp and tcp
// count it.
func (e *env) rates(ctx context.Context) (schema.Run, error) {
	udp := !e.w.TCP
	r, err := workload.ParseRate(e.cs.Rate)
	if err != nil {
		return schema.Run{}, err
	}
	bits, _ := r.At(e.cs.Size)
	srv, cl := e.servers[0], e.clients[0]
	port := e.port(5201, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartIperf3Server(ctx, srv.Netns, port, e.receiverCPU(0))
	})
	opts := workload.Iperf3Opts{Netns: cl.Netns, Addr: srv.Addr, Port: port, UDP: udp, Size: e.cs.Size,
		Duration: e.clientTime(), CPUs: e.senderCPU(0), Bitrate: strconv.FormatFloat(math.Round(bits), 'f', 0, 64)}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunIperf3(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	res := results[0].(workload.Iperf3Result)
	run.Gbps = res.BitsPerSecond / 1e9
	if udp {
		udpReceived(&run, run.Counters["tx.Udp.OutDatagrams"])
		ooo := res.OutOfOrder
		run.OutOfOrder = &ooo
		return run, nil
	}
	run.PPS = float64(run.Counters["rx.Tcp.InSegs"]) / run.WindowS
	run.LossPct = lossPct(run.Counters["tx.Tcp.OutSegs"], run.Counters["tx.Tcp.OutSegs"]-run.Counters["tx.Tcp.RetransSegs"])
	ooo, retrans := run.Counters["rx.TcpExt.TCPOFOQueue"], res.Retransmits
	run.OutOfOrder, run.Retransmits = &ooo, &retrans
	return run, nil
}
