package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The adaptive policy's engagement test: the A/B test of delivered
// traffic, for turns where the causes cannot be read (bycause.go decides
// the others, and a turn it decides never reaches the test below). Moving a stage to another CPU
// costs a backlog enqueue, an inter-processor interrupt and cold caches;
// it pays only where the CPU it leaves is the bottleneck and the one it
// reaches has room, and on some machines (few CPUs, a hypervisor's costly
// IPIs) not even then: measured on 2 vCPUs, no placement of the stages
// beat running them inline. So the agent measures instead of guessing.
// While some CPU is busy (load at or above the threshold) and a CPU of the
// set has room, it compares what the containers' sockets received (UDP
// datagrams and TCP bytes, delivered below) in alternating windows with
// falcon steering and falcon off the path, stood down (standdown.go) (A B B A: a
// steady trend then only counts against steering), and keeps
// steering on only if each window with it delivered more by engageMargin
// than each window without (pays); otherwise falcon
// stays off the path. Off means stood down, not attached and inline: the
// attached programs cost every packet 5–14 %, so steering that beat them
// by the margin could still lose to vanilla (measured on 2 vCPUs with the
// off windows inline: falcon+split stayed engaged through UDP stress at
// 0.93 × vanilla).
// What the hooks pass is no measure: moving stages off a busy sender's CPU
// lets it send more while the receiver's CPU falls behind and drops
// (measured on 2 vCPUs: more bytes through the hooks, fewer delivered).
// It tests again every engagePeriod while the condition holds, and stands
// down when no CPU has been busy for engageIdle, or no CPU to steer to
// has had room as long (spells.nothingToDo): with nothing to relieve or
// nowhere to go, a hop only adds latency, and the programs cost every
// packet. Every
// switch moves flows under the ordering guard, so the test reorders
// nothing.
const (
	engageWindow = 150 * time.Millisecond
	engagePeriod = 10 * time.Second
	engageMargin = 0.03
	engageIdle   = time.Second
	// A verdict needs traffic: below about 1,000 packets/s over the four
	// windows, on or off makes no measurable difference, and standing down
	// on such noise would leave the next flow unsteered. Counted in
	// packets (TCP segments as received), not in the verdict's bytes: a
	// TCP ping-pong of 16 B messages at 70,000 a second is about 770 full
	// segments' worth of bytes a second, and was judged too thin to test
	// (below).
	engageMinPackets = 600
	// After a test without a verdict, the next one waits engageRetry, then
	// twice as long each time (retest): each test switches the path twice.
	engageRetry = 2 * time.Second
)

func (m *falconMode) engage(ctx context.Context, h *Host) {
	var last time.Time
	sp := spells{busy: time.Now(), roomy: time.Now()}
	// Stood down from the start (startPath): the first busy spell is new.
	again := retest{idle: true}
	var byCause causeLoop
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(engageWindow):
		}
		// A set too small for a target has no A/B test either: it
		// would put falcon on the path to measure what cannot pay.
		if decideByCause && (m.byCause(h, &byCause, &again) || m.never != "") {
			continue
		}
		someBusy, room := m.busyAndRoom(h)
		now := time.Now()
		sp.see(now, someBusy, room)
		down := m.dp.Config().StoodDown
		if down {
			if now.Sub(sp.busy) > standUpCalm {
				again.calm()
			}
			if !again.due(now) || !someBusy || !room {
				continue
			}
			last = time.Time{}
		} else if !someBusy || !room {
			switch why, calm := sp.nothingToDo(now); {
			case why == "" || !m.standDown(h, why):
			case calm:
				again.calm()
			default:
				// Full: tested when a CPU has room again, first
				// after engageRetry, then twice as long each time
				// the load fills the set again (a load that swings
				// about the threshold must not switch every second).
				again.unsure(now)
			}
			continue
		}
		if !last.IsZero() && time.Since(last) < engagePeriod {
			continue
		}
		last = time.Now()
		was := !down && m.dp.Config().Engaged
		on, ok := m.probe(ctx, h)
		switch now := time.Now(); {
		case !ok:
			// No verdict: sooner than a period later, but not at once.
			// Stood down with no wait, it tested back to back: a TCP
			// ping-pong at 16 B, scored in bytes, was too thin for
			// each of 10 tests in 10 s, and each switched the path
			// twice (p99 10-15 x vanilla's, 2 vCPUs).
			again.unsure(now)
			last = now.Add(again.wait - engagePeriod)
		case m.onPath(h, on, "") != nil:
			continue // said by onPath; the next period tests again
		case on:
			again.steered()
		default:
			again.against(now)
		}
		saveAgain(h, again.at)
		switch {
		case !ok:
		case on && !was:
			h.Log().Info("steering engaged: the containers received more with it than without falcon")
		case !on:
			if was || !down {
				h.Log().Info("stood down: steering did not pay, the containers received no more with it than without falcon",
					"test_again_in", again.wait.String())
			}
		}
	}
}

// saveAgain records when the engagement test tests again, for status.
func saveAgain(h *Host, at time.Time) {
	if err := h.update(func(s *State) {
		if s.Engagement != nil {
			s.Engagement.Again = at
		}
	}); err != nil {
		h.Log().Warn("engagement test: save when it tests again, for status", "err", err)
	}
}

// retest says when falcon, stood down, tests a busy spell again. A verdict
// takes 0.6 s of one load; it must not bind a spell however long, nor
// cost a machine where steering never pays a test every period. So after
// a verdict against steering the same spell is tested again after
// engagePeriod, then twice as long each time, up to retestMax. Found on
// 16 vCPUs (results/scale-16cpu-kvm): one verdict against steering kept
// falcon off for a whole round in which its engaged rounds ran at 1.06
// and 2.33 x vanilla; before this, only a calm of standUpCalm (no CPU
// busy), which a steady load never gives, allowed another test. On 2
// vCPUs, where steering never pays, the tests cost at most 2 windows of
// 150 ms in 10 s, then less and less. A test without a verdict waits
// too (unsure), from engageRetry.
type retest struct {
	idle bool          // stood down for want of a busy CPU: test the next spell at once
	at   time.Time     // after a verdict against or none: test again from then
	wait time.Duration // how long the last such outcome waits
}

const retestMax = 320 * time.Second

// calm: no CPU was busy for a while (or falcon stood down for want of
// one); the next busy spell is new and is tested at once.
func (r *retest) calm() { *r = retest{idle: true} }

// against: a verdict against steering at now.
func (r *retest) against(now time.Time) {
	r.wait = min(max(2*r.wait, engagePeriod), retestMax)
	r.idle, r.at = false, now.Add(r.wait)
}

// unsure: a test without a verdict at now; the waits double from
// engageRetry, and from where a verdict against left them.
func (r *retest) unsure(now time.Time) {
	r.wait = min(max(2*r.wait, engageRetry), retestMax)
	r.idle, r.at = false, now.Add(r.wait)
}

// steered: a verdict for steering; a later verdict against starts the
// waits from engagePeriod again.
func (r *retest) steered() { *r = retest{} }

// due: whether falcon, stood down, may test now.
func (r *retest) due(now time.Time) bool { return r.idle || (!r.at.IsZero() && !now.Before(r.at)) }

// onPath puts falcon on the path and steering (on), or takes it off the
// path, stood down, every flow drained back inline first. why, when set,
// goes to the log; the probe's own switches are not worth a line each.
func (m *falconMode) onPath(h *Host, on bool, why string) error {
	if !on {
		if err := m.dp.SetEngaged(false); err != nil {
			h.Log().Warn("engagement", "err", err)
			return err
		}
		if !m.standDown(h, why) {
			return errors.New("still on the path")
		}
		return nil
	}
	if err := m.standUp(h, why); err != nil {
		return err
	}
	if err := m.dp.SetEngaged(true); err != nil {
		h.Log().Warn("engagement", "err", err)
		return err
	}
	return nil
}

// busyAndRoom: whether some CPU is busy (at or above the threshold), and
// whether a CPU that falcon steers to, of the set or the split set, has
// room (below it).
func (m *falconMode) busyAndRoom(h *Host) (busy, room bool) {
	smp := m.last.Load()
	if smp == nil {
		return false, false
	}
	t := uint32(h.Opts.Threshold)
	for cpu, l := range smp.PerCPU {
		busy = busy || l >= t
		room = room || (l < t && (slices.Contains(h.Opts.CPUs, cpu) || slices.Contains(h.Opts.SplitCPUs, cpu)))
	}
	return busy, room
}

// spells: when a CPU was last busy, and when a CPU falcon steers to last
// had room.
type spells struct{ busy, roomy time.Time }

func (s *spells) see(now time.Time, busy, room bool) {
	if busy {
		s.busy = now
	}
	if room {
		s.roomy = now
	}
}

// nothingToDo says why falcon, on the path, should stand down ("" where
// it should not): no CPU busy for engageIdle (calm: nothing to relieve),
// or every CPU it steers to busy as long (nothing to steer to). Full, the
// policy keeps every flow inline (the set's average is at the threshold),
// so the attached programs only cost: nginx with 200 wrk connections on
// 2 vCPUs served 0.81 x vanilla's requests with falcon on the path,
// inline, for 97 % of every window (MFLOW Fig. 11, 1 KiB files).
func (s *spells) nothingToDo(now time.Time) (why string, calm bool) {
	switch {
	case now.Sub(s.busy) > engageIdle:
		return "no CPU busy for " + engageIdle.String(), true
	case now.Sub(s.roomy) > engageIdle:
		return "no CPU to steer to with room for " + engageIdle.String(), false
	}
	return "", false
}

// probe runs the four windows, A B B A, A being the state falcon is in
// (stood down, or on the path), and says whether steering won. It ends
// in state A; the caller switches if the verdict says so.
func (m *falconMode) probe(ctx context.Context, h *Host) (on, ok bool) {
	a := !m.dp.Config().StoodDown
	// probing first: whoever waits for it to clear then sees every begun
	// test either counted as ended (thin, tested) or not yet begun.
	m.probing.Store(true)
	defer m.probing.Store(false)
	m.probes.Add(1)
	var steering, off []uint64
	var pkts uint64
	for _, steer := range []bool{a, !a, !a, a} {
		if m.onPath(h, steer, "") != nil {
			return false, false
		}
		d, ok := m.deliveredOver(ctx, h, engageWindow)
		if !ok {
			return false, false
		}
		pkts += d.packets
		if steer {
			steering = append(steering, d.score)
		} else {
			off = append(off, d.score)
		}
	}
	carried := [2]uint64{sum(off), sum(steering)}
	if pkts < engageMinPackets {
		m.thin.Add(1)
		return false, false // too little traffic to tell (or none: a busy CPU of other work)
	}
	on = pays(steering, off)
	m.tested.Add(1)
	if on {
		m.won.Add(1)
	}
	err := h.update(func(s *State) {
		e := s.Engagement
		if e == nil {
			e = &Engagement{}
			s.Engagement = e
		}
		e.Tests, e.ForSteering = m.tested.Load(), m.won.Load()
		e.Last, e.Steering, e.Off, e.Steer = time.Now(), carried[1], carried[0], on
	})
	if err != nil {
		h.Log().Warn("engagement test: save its verdict for status", "err", err)
	}
	h.Log().Info("engagement test", "delivered_steering", carried[1], "delivered_off_the_path", carried[0], "steer", on)
	return on, true
}

// pays: steering won the windows only if each window with it delivered
// more, by engageMargin, than each window without it. Comparing the sums
// engaged on ties: falcon+split on one UDP flow (2 vCPUs, 3 s warm-up,
// 8 interleaved rounds) was engaged in 5 of the 8 measured runs, where it
// delivered 0.95 of vanilla on average (0.62–1.30) and lost 5–52 % of
// what the sender sent; where the two states deliver the same, the sums
// differ by the margin about as often as not, and all four windows
// agree only about once in six. A real gain shows in every window.
func pays(steering, off []uint64) bool {
	return len(steering) > 0 && len(off) > 0 &&
		float64(slices.Min(steering)) > float64(slices.Max(off))*(1+engageMargin)
}

func sum(xs []uint64) (n uint64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// delivery is what the containers' sockets received: score, UDP datagrams
// and TCP bytes in segments of a 1500-byte MTU, which the verdict
// compares; packets, UDP datagrams and TCP segments as received, which
// say whether there was traffic enough to tell.
type delivery struct{ score, packets uint64 }

// deliveredOver says what the containers' sockets received during d.
func (m *falconMode) deliveredOver(ctx context.Context, h *Host, d time.Duration) (delivery, bool) {
	nss := m.containerNetns()
	b0, ok := m.delivered(h, nss)
	if !ok {
		return delivery{}, false
	}
	select {
	case <-ctx.Done():
		return delivery{}, false
	case <-time.After(d):
	}
	b1, ok := m.delivered(h, nss)
	ok = ok && b1.score >= b0.score && b1.packets >= b0.packets
	return delivery{b1.score - b0.score, b1.packets - b0.packets}, ok
}

// TCP is counted in bytes, not in Tcp InSegs: the kernel counts a GRO
// batch as one segment there, and steering changes how much GRO merges
// (the NIC poll of a CPU relieved of the later stages runs more often, on
// fewer packets), so segments could rise while fewer bytes arrive.
// tcpSegment converts the bytes, so that one window's UDP datagrams and
// TCP traffic add up.
const tcpSegment = 1448

func (m *falconMode) delivered(h *Host, nss []string) (delivery, bool) {
	var n delivery
	for _, ns := range nss {
		s, err := procfs.ReadSNMP(ns)
		if err != nil {
			return n, false // a container came or went: this window is void
		}
		udp, segs := uint64(s.UDP("InDatagrams")), uint64(s["Tcp"]["InSegs"]) // UDP: IPv4 and IPv6
		n.packets += udp + segs
		n.score += udp
		if m.noSockDiag.Load() {
			n.score += segs
			continue
		}
		b, err := tcpBytesReceived(ns)
		switch {
		case unsupported(err):
			// A kernel without sock_diag for TCP (CONFIG_INET_TCP_DIAG
			// off or not loadable): segments, for every window from now on.
			m.noSockDiag.Store(true)
			h.Log().Warn("engagement test: no TCP socket statistics (sock_diag); TCP is scored by Tcp InSegs, which counts a GRO batch as one", "err", err)
			return n, false
		case err != nil:
			return n, false
		}
		n.score += b / tcpSegment
	}
	return n, len(nss) > 0
}

func unsupported(err error) bool {
	return errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.EAFNOSUPPORT)
}

// tcpBytesReceived sums tcpi_bytes_received over ns's TCP sockets (sock_diag).
// A socket that closes takes its bytes along, so the sum may fall: the
// caller voids such a window.
func tcpBytesReceived(ns string) (uint64, error) {
	var sum uint64
	err := netns.Do(ns, func() error {
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			socks, err := netlink.SocketDiagTCPInfo(family)
			if err != nil {
				return err // an interrupted dump too: its sum would be short
			}
			for _, s := range socks {
				if s.TCPInfo != nil {
					sum += s.TCPInfo.Bytes_received
				}
			}
		}
		return nil
	})
	return sum, err
}
