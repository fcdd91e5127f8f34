package measure

import (
	"context"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

func init() { drivers[workload.DriverWeb] = (*env).web }

// web stands in for FALCON's Fig. 17 (CloudSuite's web serving: Elgg on
// nginx with PHP, MySQL and memcached, driven by Faban), a stack that cannot
// be installed here: nginx in the first server container serves one static
// file of the case's size, a worker per receiver CPU, to wrk --latency in the
// first client container, --flows connections over a thread per sender CPU.
// What it keeps of the original is the shape of the traffic: many
// connections of small requests answered by larger responses. Packets/s are
// the requests/s and the latency each request's round trip, both as wrk
// reports them over its whole run (the bench's warm-up, window and tail);
// loss is the requests wrk counted as failed.
func (e *env) web(ctx context.Context) (schema.Run, error) {
	srv, cl := e.servers[0], e.clients[0]
	port := e.port(14080, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartNginx(ctx, workload.NginxOpts{Netns: srv.Netns, Addr: srv.Addr, Port: port,
			CPUs: e.cfg.ReceiverCPUs, Workers: len(e.cfg.ReceiverCPUs), Size: e.cs.Size})
	})
	opts := workload.WrkOpts{Netns: cl.Netns, Addr: srv.Addr, Port: port, Path: workload.NginxPath(e.cs.Size),
		Threads: wrkThreads(e.cs.Flows, len(e.cfg.SenderCPUs)), Connections: e.cs.Flows,
		Duration: e.clientTime(), CPUs: e.cfg.SenderCPUs}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunWrk(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	r := results[0].(workload.WrkResult)
	run.Latency = &schema.Latency{AvgUs: r.AvgUs, P50Us: r.P50Us, P90Us: r.P90Us, P99Us: r.P99Us, MaxUs: r.MaxUs}
	run.PPS = r.RequestsPerSec
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	// Socket errors cost a request each; timeouts and error statuses are
	// among the requests wrk completed.
	tried := r.Requests + r.ConnectErrors + r.ReadErrors + r.WriteErrors
	run.LossPct = lossPct(tried, tried-r.Errors())
	return run, nil
}

// wrkThreads is a thread per sender CPU, fewer where they would not share
// the connections out evenly (wrk drops the remainder).
func wrkThreads(conns, cpus int) int {
	t := max(min(conns, cpus), 1)
	for conns%t != 0 {
		t--
	}
	return t
}
