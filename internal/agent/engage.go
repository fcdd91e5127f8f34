package agent

import (
	"context"
	"slices"
	"time"
)

// The adaptive policy's engagement test. Moving a stage to another CPU
// costs a backlog enqueue, an inter-processor interrupt and cold caches;
// it pays only where the CPU it leaves is the bottleneck and the one it
// reaches has room, and on some machines (few CPUs, a hypervisor's costly
// IPIs) not even then: measured on 2 vCPUs, no placement of the stages
// beat running them inline. So the agent measures instead of guessing.
// While some CPU is busy (load at or above the threshold) and a CPU of the
// set has room, it compares the bytes the hooks pass in alternating
// windows with steering off and on (off, on, on, off: a trend cancels)
// and keeps steering on only if it carried more by engageMargin. It tests
// again every engagePeriod while the condition holds. Every switch moves
// flows under the ordering guard, so the test reorders nothing.
const (
	engageWindow = 150 * time.Millisecond
	engagePeriod = 10 * time.Second
	engageMargin = 0.03
)

func (m *falconMode) engage(ctx context.Context, h *Host) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(engageWindow):
		}
		if !last.IsZero() && time.Since(last) < engagePeriod {
			continue
		}
		if !m.worthTesting(h) {
			continue
		}
		last = time.Now()
		on, ok := m.probe(ctx)
		if !ok {
			continue
		}
		was := m.dp.Config().Engaged
		if err := m.dp.SetEngaged(on); err != nil {
			h.Logf("engagement: %v", err)
			continue
		}
		if on != was {
			if on {
				h.Logf("steering engaged: it carried more than inline")
			} else {
				h.Logf("steering stepped aside: it carried no more than inline")
			}
		}
	}
}

// worthTesting: some CPU is busy and a CPU of the set has room.
func (m *falconMode) worthTesting(h *Host) bool {
	smp := m.last.Load()
	if smp == nil {
		return false
	}
	t := uint32(h.Opts.Threshold)
	busy, room := false, false
	for cpu, l := range smp.PerCPU {
		busy = busy || l >= t
		room = room || (l < t && slices.Contains(h.Opts.CPUs, cpu))
	}
	return busy && room
}

// probe runs the off/on/on/off windows and says whether on won.
func (m *falconMode) probe(ctx context.Context) (on, ok bool) {
	var carried [2]uint64
	for _, eng := range []bool{false, true, true, false} {
		if m.dp.SetEngaged(eng) != nil {
			return false, false
		}
		b, ok := m.bytesOver(ctx, engageWindow)
		if !ok {
			return false, false
		}
		if eng {
			carried[1] += b
		} else {
			carried[0] += b
		}
	}
	return float64(carried[1]) > float64(carried[0])*(1+engageMargin), true
}

func (m *falconMode) bytesOver(ctx context.Context, d time.Duration) (uint64, bool) {
	read := func() (uint64, bool) {
		c, err := m.dp.Counters()
		return c.Bytes, err == nil
	}
	b0, ok := read()
	if !ok {
		return 0, false
	}
	select {
	case <-ctx.Done():
		return 0, false
	case <-time.After(d):
	}
	b1, ok := read()
	return b1 - b0, ok
}
