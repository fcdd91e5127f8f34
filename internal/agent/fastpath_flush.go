package agent

import (
	"encoding/binary"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fastLearnedFlush: how often neighbours and FDB entries the kernel learned
// from traffic may invalidate the caches (docs/fastpath.md#fairness). A
// container makes the kernel learn at will: a frame from a new source MAC
// teaches the bridge (and a VXLAN device that learns) an FDB entry, an ARP
// packet with a new sender address, or a datagram to an unused address of a
// routed subnet, a neighbour. Flushed for each, one container would keep
// every other's flows relearning. A learned change waits at most this long.
const fastLearnedFlush = time.Second

// announced says what a datagram b on the watch's socket i stands for:
// a neighbour socket's datagram of learned entries only is watchNeigh, one
// that also set up or removed a configured entry (permanent neighbours,
// static and externally learned FDB entries: the host's daemons and
// administrators, which flannel's and Docker's overlays are made of) is
// watchRoute, flushed at once. An overflowed neighbour socket (b nil) is
// watchNeigh too: a container that floods it cannot flush faster.
func announced(i int, b []byte) int {
	if i != watchNeigh || b == nil {
		return i
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return watchRoute
	}
	for _, m := range msgs {
		if !learnedNeigh(m) {
			return watchRoute
		}
	}
	return watchNeigh
}

// learnedNeigh says whether m announces a neighbour or FDB entry the kernel
// learned from traffic (struct ndmsg: family, pad, ifindex, state, flags).
func learnedNeigh(m syscall.NetlinkMessage) bool {
	if m.Header.Type != unix.RTM_NEWNEIGH && m.Header.Type != unix.RTM_DELNEIGH || len(m.Data) < unix.SizeofNdMsg {
		return false
	}
	family, state, flags := m.Data[0], binary.NativeEndian.Uint16(m.Data[8:]), m.Data[10]
	if state&unix.NUD_PERMANENT != 0 || flags&unix.NTF_EXT_LEARNED != 0 {
		return false
	}
	// NOARP: an FDB entry added as static; a neighbour on a device without
	// ARP, which traffic creates.
	return state&unix.NUD_NOARP == 0 || family != unix.AF_BRIDGE
}

// flushLimiter runs a flush at most once per period: a request within a
// period of the last flush is served at its end, together with every
// other request made meanwhile.
type flushLimiter struct {
	period time.Duration
	mu     sync.Mutex
	last   time.Time
	timer  *time.Timer
	// forced: flushes run (at once or later); deferred: requests that
	// waited for the end of a period.
	forced, deferred uint64
}

func (l *flushLimiter) request(flush func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.deferred++
		return
	}
	if wait := time.Until(l.last.Add(l.period)); wait > 0 {
		l.deferred++
		l.timer = time.AfterFunc(wait, func() {
			l.mu.Lock()
			l.timer, l.last = nil, time.Now()
			l.forced++
			l.mu.Unlock()
			flush()
		})
		return
	}
	l.last = time.Now()
	l.forced++
	flush()
}

// stop drops a flush not run yet (the fast path is going).
func (l *flushLimiter) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// counts are the flushes learned entries caused and the requests that
// waited.
func (l *flushLimiter) counts() (forced, deferred uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forced, l.deferred
}
