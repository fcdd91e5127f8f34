package sim

import (
	"math"
	"slices"
	"sort"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/loadavg"
	"github.com/falconnet/falcon/internal/steer"
)

// dispatch starts the CPU's next piece of work if it is free. The
// softirq runs first, as it does at the end of an interrupt or a
// local_bh_enable (a sender's transmit polls the wire that way), until it
// has run for softirqSpan with a thread waiting. Then ksoftirqd has taken
// over: it shares the CPU with the threads, by vruntime as CFS would, with
// the weight that gives it the share of a contended CPU the calibration
// measured (Costs.SoftShare), until its queues are empty.
func (w *world) dispatch(c *cpu) {
	if c.running {
		return
	}
	ready := w.runnable(c)
	soft := c.queued > 0 || c.txShare > 0
	if !soft {
		c.streak, c.ksoftirqd = 0, false
	}
	if len(ready) == 0 {
		if soft {
			w.startSoft(c)
		}
		return
	}
	var best *thread
	for _, t := range ready {
		if best == nil || t.vrun < best.vrun {
			best = t
		}
	}
	if soft && !c.ksoftirqd {
		if c.streak < softirqSpan {
			w.startSoft(c)
			return
		}
		c.ksoftirqd, c.softV = true, max(c.softV, best.vrun)
	}
	if soft && c.softV <= best.vrun {
		w.startSoft(c)
		return
	}
	cost := w.c.App
	switch {
	case best.sender:
		cost = w.c.Send
	case best.hot && w.c.AppBusy > 0:
		cost = w.c.AppBusy
	}
	c.running, c.cur, c.curStart = true, best, w.now
	best.vrun = max(best.vrun, c.softV-softirqSpan) + cost // a woken thread gets no credit for its sleep
	w.busy(c, cost)
	w.push(event{t: w.now + cost, kind: evCPU, cpu: c})
}

// softWeight is ksoftirqd's CFS weight against a thread's.
func (w *world) softWeight() float64 {
	s := w.c.SoftShare
	if s <= 0 || s >= 1 {
		return 1
	}
	return s / (1 - s)
}

func (w *world) startSoft(c *cpu) {
	cost := c.txShare
	if cost > 0 {
		c.txShare = 0
		c.curItem = item{}
	} else {
		for len(c.q[c.turn]) == 0 || c.left <= 0 {
			c.turn, c.left = (c.turn+1)%nStages, napiBudget
		}
		c.left--
		it := c.q[c.turn][0]
		c.q[c.turn] = c.q[c.turn][1:]
		c.queued--
		if h := hookBefore(it.stage); h >= 0 && it.p != nil {
			it.p.f.arrived[h]++
			it.p.f.lastArrive[h] = w.now
		}
		if it.stage == stContainer && len(it.p.f.sock) >= w.sockCap {
			// the socket will have no room: the stage frees the datagram
			// instead of queuing it and waking the application.
			it.cost += w.c.ContainerDrop - w.c.Container
		}
		c.curItem, cost = it, it.cost
	}
	c.running, c.cur, c.curStart = true, nil, w.now
	c.streak += cost
	if c.ksoftirqd {
		c.softV += cost / w.softWeight()
	}
	w.busy(c, cost)
	w.push(event{t: w.now + cost, kind: evCPU, cpu: c})
}

// busy books d ns of work starting now on c, the measured part apart.
func (w *world) busy(c *cpu, d float64) {
	c.busy += d
	lo, hi := max(w.now, w.start), min(w.now+d, w.end)
	if hi > lo {
		c.busyWin += hi - lo
	}
}

// The hooks whose ordering guard counts arrivals, by the index of their
// entries: the split (XDP), the NIC's and the overlay's tc hooks.
const (
	hookSplit = iota
	hookNIC
	hookOverlay
)

// hookBefore is the hook that chose the CPU of a stage, whose guard counts
// the packet as arrived when the stage starts; -1 for none.
func hookBefore(stage int) int {
	switch stage {
	case stBuild:
		return hookSplit // counted only where a split chose it: see steer
	case stVXLAN:
		return hookNIC
	case stContainer:
		return hookOverlay
	}
	return -1
}

func (w *world) finish(c *cpu) {
	c.running = false
	if t := c.cur; t != nil {
		c.cur = nil
		if t.sender {
			w.arrive(t.f, c.curStart)
			return
		}
		p := t.f.sock[0]
		t.f.sock = t.f.sock[1:]
		t.hot = len(t.f.sock) > 0 // the next read returns at once: no sleep, no wakeup
		w.deliver(p)
		return
	}
	w.advance(c, c.curItem)
}

func (w *world) deliver(p *packet) {
	if p.seq < p.f.lastSeq {
		if w.measuring() {
			w.reordered++
		}
	} else {
		p.f.lastSeq = p.seq
	}
	if w.measuring() && p.born >= w.start {
		w.delivered++
		w.lat = append(w.lat, w.now-p.born)
	}
}

// advance moves a packet whose stage just ended on c to its next stage.
func (w *world) advance(c *cpu, it item) {
	p := it.p
	if p == nil {
		return // a hand-over's share
	}
	f := p.f
	o := w.s.Mode
	nicRPS, vxRPS, ctRPS := o.rpsOn()
	next := item{p: p, stage: it.stage + 1}
	target := c.id
	switch it.stage {
	case stXDP:
		next.cost = w.c.Build
		target = w.steer(f, hookSplit, c.id, w.splitS)
	case stBuild:
		next.cost = w.c.NIC
		if o.falcon() {
			next.cost += w.c.Hook
		}
		if nicRPS {
			target = w.rpsTarget(f)
		}
	case stNIC:
		next.cost = w.c.VXLAN
		switch {
		case o.falcon():
			next.cost += w.c.Hook
			target = w.steer(f, hookNIC, c.id, w.falconS)
		case vxRPS:
			target = w.rpsTarget(f)
		}
	case stVXLAN:
		next.cost = w.c.Container
		switch {
		case o.falcon():
			target = w.steer(f, hookOverlay, c.id, w.falconS)
		case ctRPS:
			target = w.rpsTarget(f)
		}
	case stContainer:
		if len(f.sock) >= w.sockCap {
			w.drop()
			return
		}
		f.sock = append(f.sock, p)
		w.dispatch(w.cpus[f.appCPU])
		return
	}
	to := w.cpus[target]
	if to != c {
		// the sending CPU pays its share of the hand-over next, the
		// taking one with the stage.
		next.cost += w.c.HandoffRx
		c.txShare += w.c.HandoffTx
	}
	w.queue(to, next)
}

// rpsTarget is RPS's choice, or RFS's: the CPU the flow's application
// last ran on, which the socket recorded under the same skb hash. With
// one hash at every device, the first device with RPS moves the flow and
// the others keep it where it is.
func (w *world) rpsTarget(f *flow) int {
	if w.s.Mode.rfs() {
		return f.appCPU
	}
	return steer.RPSCPU(f.skbHash, w.rpsS)
}

// steer is falcon's choice at hook h for the next stage of f, running on
// cur: the policy (internal/steer, the BPF program's twin) behind the
// ordering guard, unless the mode chose per-packet order.
func (w *world) steer(f *flow, h, cur int, set []int) int {
	// The salts as the datapath makes them from the VXLAN device's
	// ifindex (any value stands for one; the split's is the NIC's).
	salt := map[int]uint32{hookSplit: vxlanIfindex - 1, hookNIC: vxlanIfindex, hookOverlay: vxlanIfindex | 1<<30}[h]
	o := w.s.Mode.Opts
	v := steer.Variant{Static: o.Policy == datapath.PolicyStatic, AlwaysOn: o.AlwaysOn}
	want := func(prev int) int {
		if datapath.Unconditional(o.Policy) {
			cpu, kind := steer.ChooseVariant(f.hash, salt, set, w.loads, uint32(o.Threshold), w.avg, false, v)
			if kind == steer.Fallback {
				return -1
			}
			return slices.Index(set, cpu)
		}
		i, _ := steer.ChooseAdaptiveIndex(f.hash, salt, set, w.loads, uint32(o.Threshold), w.avg, false, o.AlwaysOn, w.engaged, cur, prev)
		return i
	}
	var idx int
	switch {
	case o.PerPacket:
		idx = want(-1)
	case f.guard[h] == nil:
		e := steer.Start(uint64(w.now), f.arrived[h], 1, uint64(sampleEvery), uint64(o.GuardTimeout.Nanoseconds()),
			w.now < float64(o.GuardTimeout.Nanoseconds()), true, want)
		f.guard[h] = &e
		idx = e.Target
	default:
		idx = f.guard[h].Guard(uint64(w.now), f.arrived[h], uint64(f.lastArrive[h]), 1, want).Target
	}
	if idx < 0 || idx >= len(set) {
		return cur
	}
	return set[idx]
}

// sample is the agent's load sampler: each CPU's busy share of the last
// period, smoothed as loadavg does.
func (w *world) sample() {
	var sum float64
	n := 0
	for _, c := range w.cpus {
		b := 100 * min(c.busy, sampleEvery) / sampleEvery
		c.busy = 0
		if c.sampled {
			c.load = loadavg.DefaultWeight*b + (1-loadavg.DefaultWeight)*c.load
		} else {
			c.load, c.sampled = b, true
		}
		w.loads[c.id] = uint32(math.Round(c.load))
	}
	for _, id := range w.falconS {
		sum += float64(w.loads[id])
		n++
	}
	if n > 0 {
		w.avg = uint32(math.Round(sum / float64(n)))
	}
}

const vxlanIfindex = 4

func (w *world) outcome() Outcome {
	d := float64(w.s.Duration.Nanoseconds()) / 1e9
	o := Outcome{SentPPS: float64(w.sent) / d, PPS: float64(w.delivered) / d, Busy: map[int]float64{},
		Reordered: w.reordered, Engaged: w.engaged}
	if w.sent > 0 {
		o.LossPct = 100 * float64(max(0, w.sent-w.delivered)) / float64(w.sent)
	}
	sort.Float64s(w.lat)
	o.P50Us, o.P99Us = pct(w.lat, 0.50)/1e3, pct(w.lat, 0.99)/1e3
	for _, c := range w.cpus {
		o.Busy[c.id] = math.Round(1000*c.busyWin/float64(w.s.Duration.Nanoseconds())) / 10
	}
	return o
}

func pct(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
