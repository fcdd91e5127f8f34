package agent

import (
	"context"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/procfs"
)

// The adaptive policy's engagement test. Moving a stage to another CPU
// costs a backlog enqueue, an inter-processor interrupt and cold caches;
// it pays only where the CPU it leaves is the bottleneck and the one it
// reaches has room, and on some machines (few CPUs, a hypervisor's costly
// IPIs) not even then: measured on 2 vCPUs, no placement of the stages
// beat running them inline. So the agent measures instead of guessing.
// While some CPU is busy (load at or above the threshold) and a CPU of the
// set has room, it compares what the containers' sockets received (UDP
// datagrams and TCP segments, from each container namespace's SNMP
// counters) in alternating windows with steering off and on (off, on, on,
// off: a trend cancels) and keeps steering on only if it delivered more by
// engageMargin; otherwise falcon stands down, off the path (standdown.go).
// What the hooks pass is no measure: moving stages off a busy sender's CPU
// lets it send more while the receiver's CPU falls behind and drops
// (measured on 2 vCPUs: more bytes through the hooks, fewer delivered).
// It tests again every engagePeriod while the condition holds, and stands
// down when no CPU has been busy for engageIdle: with nothing to relieve,
// a hop only adds latency, and the programs cost every packet. Every
// switch moves flows under the ordering guard, so the test reorders
// nothing.
const (
	engageWindow = 150 * time.Millisecond
	engagePeriod = 10 * time.Second
	engageMargin = 0.03
	engageIdle   = time.Second
	// A verdict needs traffic: below about 1,000 packets/s over the four
	// windows, on or off makes no measurable difference, and standing down
	// on such noise would leave the next flow unsteered.
	engageMinPackets = 600
	engageRetry      = 2 * time.Second
)

func (m *falconMode) engage(ctx context.Context, h *Host) {
	var last time.Time
	busy := time.Now()
	// Stood down for want of a busy CPU: the next busy spell brings falcon
	// back at once. After a spell that did not pay, only once it is over.
	idleDown := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(engageWindow):
		}
		someBusy, room := m.busyAndRoom(h)
		if someBusy {
			busy = time.Now()
		}
		if m.dp.Config().StoodDown {
			if !idleDown && time.Since(busy) > standUpCalm {
				idleDown = true
			}
			if idleDown && someBusy && room {
				m.standUp(h, "a CPU is busy and the set has room")
				last = time.Time{}
			}
			continue
		}
		if !someBusy || !room {
			if time.Since(busy) > engageIdle && m.standDown(h, "no CPU busy for "+engageIdle.String()) {
				idleDown = true
			}
			continue
		}
		if !last.IsZero() && time.Since(last) < engagePeriod {
			continue
		}
		last = time.Now()
		on, ok := m.probe(ctx)
		if !ok {
			// No verdict: try again soon rather than a period later.
			last = last.Add(engageRetry - engagePeriod)
			continue
		}
		was := m.dp.Config().Engaged
		if err := m.dp.SetEngaged(on); err != nil {
			h.Log().Warn("engagement", "err", err)
			continue
		}
		switch {
		case on && !was:
			h.Log().Info("steering engaged: the containers received more with it")
		case !on:
			if m.standDown(h, "steering did not pay: the containers received no more with it") {
				idleDown = false
			}
		}
	}
}

// busyAndRoom: whether some CPU is busy (at or above the threshold), and
// whether a CPU of the set has room (below it).
func (m *falconMode) busyAndRoom(h *Host) (busy, room bool) {
	smp := m.last.Load()
	if smp == nil {
		return false, false
	}
	t := uint32(h.Opts.Threshold)
	for cpu, l := range smp.PerCPU {
		busy = busy || l >= t
		room = room || (l < t && slices.Contains(h.Opts.CPUs, cpu))
	}
	return busy, room
}

// probe runs the off/on/on/off windows and says whether on won.
func (m *falconMode) probe(ctx context.Context) (on, ok bool) {
	var carried [2]uint64
	for _, eng := range []bool{false, true, true, false} {
		if m.dp.SetEngaged(eng) != nil {
			return false, false
		}
		b, ok := m.deliveredOver(ctx, engageWindow)
		if !ok {
			return false, false
		}
		if eng {
			carried[1] += b
		} else {
			carried[0] += b
		}
	}
	if carried[0]+carried[1] < engageMinPackets {
		return false, false // too little traffic to tell (or none: a busy CPU of other work)
	}
	return float64(carried[1]) > float64(carried[0])*(1+engageMargin), true
}

// deliveredOver counts the UDP datagrams and TCP segments the containers'
// sockets received during d.
func (m *falconMode) deliveredOver(ctx context.Context, d time.Duration) (uint64, bool) {
	nss := m.containerNetns()
	b0, ok := delivered(nss)
	if !ok {
		return 0, false
	}
	select {
	case <-ctx.Done():
		return 0, false
	case <-time.After(d):
	}
	b1, ok := delivered(nss)
	return b1 - b0, ok && b1 >= b0
}

func delivered(nss []string) (uint64, bool) {
	var n uint64
	for _, ns := range nss {
		s, err := procfs.ReadSNMP(ns)
		if err != nil {
			return 0, false // a container came or went: this window is void
		}
		n += uint64(s["Udp"]["InDatagrams"] + s["Tcp"]["InSegs"])
	}
	return n, len(nss) > 0
}
