package probes

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/procfs"
)

// Wait waits d, or until ctx ends.
func Wait(ctx context.Context, d time.Duration) error {
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
// servers' namespaces grew in every poll for TrafficSteady: the tools
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
	TrafficSteady  = 200 * time.Millisecond
	trafficTimeout = 15 * time.Second
)

// AwaitTraffic returns when the traffic is steady (TrafficSteady).
func (p *Probes) AwaitTraffic(ctx context.Context) (time.Time, error) {
	count := func() (int64, error) {
		var n int64
		for _, ns := range append(slices.Clone(p.RX), p.TX...) {
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
		if err := Wait(ctx, trafficPoll); err != nil {
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
		if !since.IsZero() && now.Sub(since) >= TrafficSteady {
			return now.UTC(), nil
		}
		last, at = n, now
	}
}
