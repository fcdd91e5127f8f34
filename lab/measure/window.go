package measure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/probes"
	"github.com/falconnet/falcon/lab/schema"
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
	p := e.probes(t)
	started, before, after, err := e.measureWindow(ctx, p)
	if err != nil {
		return schema.Run{}, nil, cl.fail(err)
	}
	cl.wg.Wait()
	results, raw, err := cl.results(after.At)
	if err != nil {
		return schema.Run{}, nil, err
	}
	for _, s := range srvs {
		if err := s.Stop(); err != nil {
			return schema.Run{}, nil, err
		}
	}
	srvs = nil
	run := p.Window(before.Sample, after.Sample)
	run.Falcon = e.mode.Between(before.falcon, after.falcon)
	run.FastPath = modes.FastBetween(before.falcon, after.falcon)
	run.Started, run.Tool = started, raw
	if run.WindowS <= 0 {
		return schema.Run{}, nil, fmt.Errorf("empty measurement window")
	}
	return run, results, nil
}

// measureWindow waits for the traffic and the warm-up, and samples the
// counters at both ends of the window.
func (e *env) measureWindow(ctx context.Context, p *probes.Probes) (started time.Time, before, after sample, err error) {
	if started, err = p.AwaitTraffic(ctx); err != nil {
		return
	}
	if err = probes.Wait(ctx, time.Duration(e.cfg.Warmup)); err != nil {
		return
	}
	if before, err = e.sample(p); err != nil {
		return
	}
	if err = probes.Wait(ctx, time.Duration(e.cfg.Duration)); err != nil {
		return
	}
	after, err = e.sample(p)
	return
}

// sample is every counter at one end of the window, and what the mode's
// agent did so far.
type sample struct {
	probes.Sample
	falcon modes.Reading
}

func (e *env) sample(p *probes.Probes) (sample, error) {
	falcon := e.mode.Read()
	s, err := p.Sample()
	return sample{s, falcon}, err
}

// probes reads the counters of t's namespaces, and what the bench asked
// for besides.
func (e *env) probes(t traffic) *probes.Probes {
	return &probes.Probes{Testbed: e.tb, RX: t.rx, TX: t.tx, Sent: t.sent, BPFStats: e.cfg.BPFStats, Cost: e.cost, Order: e.order}
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
