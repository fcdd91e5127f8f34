package datapath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/conntrack"
	"github.com/falconnet/falcon/internal/netns"
)

// CtKeeper keeps the host's conntrack in step with the flows on the fast
// path, whose packets it never sees (docs/fastpath.md#conntrack).
//
// Invariants, so that a flow may return to the slow path at any moment
// (an invalidation, idleness, a killed agent, disable) without a packet
// of it turning INVALID or finding its entry gone:
//   - a cached TCP flow is used only once its conntrack entry, if it has
//     one, is ESTABLISHED and tracks both directions liberally (the
//     programs hold the cache entry at FP_CT_WAIT until Keep);
//   - the conntrack entry of a flow in use never expires before the
//     kernel would have let it, had the flow's packets passed: each round
//     renews it to what the flow's last packet would have set, within the
//     programs' one-second clock of use; and the programs drop a cache
//     entry unused for a third of the shortest timeout, before any renewal
//     could lapse;
//   - a flow whose conntrack entry has gone (deleted, or leaving
//     ESTABLISHED) loses its cache entries, so conntrack sees it again.
type CtKeeper struct {
	fp     *FastPath
	ct     *conntrack.Conn
	tmo    ctTimeouts
	log    *slog.Logger
	mu     sync.Mutex
	conns  map[FastFlow]*ctConn // by the connection's canonical direction
	counts ctCounts
	// established: the host's rules send packets of connections not yet
	// established to user space (a queue the judge passed), so every flow,
	// UDP's too, is let on only once conntrack has it ESTABLISHED, and an
	// untracked one never (each of its packets is new to the rules).
	established atomic.Bool
}

// SetEstablishedOnly: whether every flow, UDP's too, must wait for its
// connection to be ESTABLISHED before its entries are used (the host
// queues new connections to user space).
func (k *CtKeeper) SetEstablishedOnly(on bool) { k.established.Store(on) }

// ctConn is what the keeper remembers of a cached connection.
type ctConn struct {
	seen    time.Time     // first seen with a conntrack entry
	renewed time.Duration // the cache's last use it renewed the entry for
	tracked bool          // conntrack had an entry for it
}

type ctCounts struct {
	kept, renewed, forgotten, failed atomic.Uint64
}

// CtReport is the conntrack keeper's part of status.
type CtReport struct {
	// Tracked: the host namespace tracks connections, so the keeper runs.
	Tracked bool `json:"tracked"`
	// Period: how often it renews the entries of flows in use.
	Period string `json:"period,omitempty"`
	// Kept: TCP flows let onto the fast path after their entries were made
	// liberal; Renewed: entries' timeouts renewed; Forgotten: flows sent
	// back to the slow path because their entries went; Failed: ctnetlink
	// requests that failed (those flows stay slow).
	Kept      uint64 `json:"kept"`
	Renewed   uint64 `json:"renewed"`
	Forgotten uint64 `json:"forgotten"`
	Failed    uint64 `json:"failed"`
	// Established: every flow waits for its connection to be ESTABLISHED,
	// as the host's rules judge new packets in user space (a queue).
	Established bool `json:"established,omitempty"`
}

// ctTimeouts are the namespace's conntrack timeouts the fast path can
// outlast: UDP without and with replies seen both ways, and TCP
// established.
type ctTimeouts struct {
	udp, udpStream, tcpEstablished time.Duration
}

var ctSysctls = []string{"nf_conntrack_udp_timeout", "nf_conntrack_udp_timeout_stream", "nf_conntrack_tcp_timeout_established"}

// readCtTimeouts reads ns's timeouts; ok is false where the namespace has
// no connection tracking at all.
func readCtTimeouts(ns string) (t ctTimeouts, ok bool, err error) {
	vals := make([]time.Duration, len(ctSysctls))
	err = netns.Do(ns, func() error {
		for i, name := range ctSysctls {
			b, err := os.ReadFile("/proc/sys/net/netfilter/" + name)
			if errors.Is(err, os.ErrNotExist) {
				return err
			}
			if err != nil {
				return err
			}
			s, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || s <= 0 {
				return fmt.Errorf("%s: %q is not a timeout", name, b)
			}
			vals[i] = time.Duration(s) * time.Second
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("read conntrack timeouts of %s: %w", netns.Label(ns), err)
	}
	return ctTimeouts{udp: vals[0], udpStream: vals[1], tcpEstablished: vals[2]}, true, nil
}

// idle is how long a cache entry may go unused, and period how often the
// keeper renews: a third and a sixth of the shortest timeout, so that an
// entry's last renewal always outlives the cache entry (docs/fastpath.md).
// idle is at least two seconds, as the programs note an entry's use once a
// second (TOUCH_NS): timeouts under six seconds break the bound.
func (t ctTimeouts) idle() time.Duration {
	return max(min(t.udp, t.udpStream, t.tcpEstablished)/3, 2*time.Second)
}

func (t ctTimeouts) period() time.Duration {
	return min(max(min(t.udp, t.udpStream, t.tcpEstablished)/6, 250*time.Millisecond), 5*time.Second)
}

// KeepConntrack tells the programs how to treat conntrack in ns and, where
// connections are tracked, keeps them in step until ctx ends.
func KeepConntrack(ctx context.Context, wg *sync.WaitGroup, ns string, fp *FastPath, log *slog.Logger) (*CtKeeper, error) {
	tmo, tracked, err := readCtTimeouts(ns)
	if err != nil {
		return nil, err
	}
	if !tracked {
		return nil, fp.SetConntrack(false, 0)
	}
	ct, err := conntrack.Open(ns)
	if err != nil {
		return nil, err
	}
	rd, err := fp.ConntrackRequests()
	if err != nil {
		ct.Close()
		return nil, fmt.Errorf("fast path: read conntrack requests: %w", err)
	}
	if err := fp.SetConntrack(true, tmo.idle()); err != nil {
		rd.Close()
		ct.Close()
		return nil, err
	}
	k := &CtKeeper{fp: fp, ct: ct, tmo: tmo, log: log, conns: map[FastFlow]*ctConn{}}
	wg.Add(2)
	go func() {
		defer wg.Done()
		k.requests(rd)
	}()
	go func() {
		defer wg.Done()
		defer ct.Close()
		defer rd.Close() // ends requests
		k.rounds(ctx)
	}()
	return k, nil
}

// requests answers the learning points as they ask.
func (k *CtKeeper) requests(rd *ringbuf.Reader) {
	for {
		rec, err := rd.Read()
		if err != nil {
			return // closed
		}
		dir, flow, gen, err := ParseConntrackRequest(rec.RawSample)
		if err == nil {
			k.keep(dir, flow, gen)
		}
	}
}

func (k *CtKeeper) rounds(ctx context.Context) {
	tick := time.NewTicker(k.tmo.period())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := k.round(); err != nil {
			k.log.Warn("fast path: conntrack round", "err", err)
		}
	}
}

func (k *CtKeeper) Report() *CtReport {
	return &CtReport{
		Tracked: true, Period: k.tmo.period().String(),
		Kept: k.counts.kept.Load(), Renewed: k.counts.renewed.Load(),
		Forgotten: k.counts.forgotten.Load(), Failed: k.counts.failed.Load(),
		Established: k.established.Load(),
	}
}

func tupleOf(f FastFlow) conntrack.Tuple {
	return conntrack.Tuple{Src: f.Src, Dst: f.Dst, Sport: f.Sport, Dport: f.Dport, Proto: f.Proto}
}

// canonical names a connection by one of its two directions, the same
// for both.
func canonical(f FastFlow) FastFlow {
	rev := FastFlow{Src: f.Dst, Dst: f.Src, Sport: f.Dport, Dport: f.Sport, Proto: f.Proto}
	if c := f.Src.Compare(f.Dst); c > 0 || c == 0 && f.Sport > f.Dport {
		return rev
	}
	return f
}

func (k *CtKeeper) conn(f FastFlow) *ctConn {
	c := canonical(f)
	k.mu.Lock()
	defer k.mu.Unlock()
	cc := k.conns[c]
	if cc == nil {
		cc = &ctConn{}
		k.conns[c] = cc
	}
	return cc
}

// keep lets a waiting entry be used once its connection's conntrack
// entry is ESTABLISHED and, for TCP, tracks it liberally; untracked
// connections have nothing to keep in step, and are let on unless the
// rules need established ones. A connection not ESTABLISHED stays slow.
func (k *CtKeeper) keep(dir FastDir, flow FastFlow, gen uint32) {
	t := tupleOf(flow)
	e, err := k.ct.Get(t)
	switch {
	case errors.Is(err, conntrack.ErrNotFound):
		if k.established.Load() {
			return
		}
	case err != nil:
		k.counts.failed.Add(1)
		return
	case !established(flow.Proto, e):
		return
	default:
		if flow.Proto == unix.IPPROTO_TCP {
			if err := k.ct.Update(t, conntrack.Change{Liberal: true}); err != nil {
				k.counts.failed.Add(1)
				return
			}
		}
		cc := k.conn(flow)
		k.mu.Lock()
		cc.tracked = true
		k.mu.Unlock()
	}
	if k.fp.Keep(dir, flow, gen) == nil {
		k.counts.kept.Add(1)
	}
}

// established says whether conntrack's entry e has its connection
// ESTABLISHED, so that every later packet of it is: TCP's state, and
// otherwise a reply seen (what makes conntrack call a UDP packet
// established).
func established(proto uint8, e conntrack.Entry) bool {
	if proto == unix.IPPROTO_TCP {
		return e.TCPState == conntrack.TCPEstablished
	}
	return e.Status&conntrack.SeenReply != 0
}

// round keeps every waiting entry the requests missed, renews the
// conntrack entries of connections used since the last round, and forgets
// what left the caches.
func (k *CtKeeper) round() error {
	used := map[FastFlow]time.Duration{}
	var waiting []FastEntry
	err := k.fp.Entries(func(e FastEntry) {
		if !e.Kept {
			waiting = append(waiting, e)
			return
		}
		c := canonical(e.Flow)
		used[c] = max(used[c], e.Used)
	})
	if err != nil {
		return err
	}
	for _, e := range waiting {
		k.keep(e.Dir, e.Flow, e.Gen)
	}
	k.mu.Lock()
	for c := range k.conns {
		if _, ok := used[c]; !ok {
			delete(k.conns, c)
		}
	}
	k.mu.Unlock()
	for c, u := range used {
		k.renew(c, u)
	}
	return nil
}

// renew sets the timeout of c's conntrack entry to what a packet at used
// (the cache's last use) would have set, never shortening it.
func (k *CtKeeper) renew(c FastFlow, used time.Duration) {
	cc := k.conn(c)
	k.mu.Lock()
	fresh := used > cc.renewed
	k.mu.Unlock()
	if !fresh {
		return
	}
	t := tupleOf(c)
	e, err := k.ct.Get(t)
	if errors.Is(err, conntrack.ErrNotFound) || err == nil && c.Proto == unix.IPPROTO_TCP && e.TCPState != conntrack.TCPEstablished {
		k.mu.Lock()
		gone := cc.tracked || err == nil
		k.mu.Unlock()
		if gone {
			k.fp.Forget(c)
			k.counts.forgotten.Add(1)
		}
		return
	}
	if err != nil {
		k.counts.failed.Add(1)
		return
	}
	r := k.timeout(cc, c.Proto, e)
	left := r.Timeout - min(FastClock()-used, r.Timeout)
	var ch conntrack.Change
	if s := uint32((left + time.Second - 1) / time.Second); s > e.Timeout {
		ch.Timeout = s
	}
	if r.Status != 0 {
		ch.Status = e.Status | r.Status
	}
	if ch != (conntrack.Change{}) {
		if err := k.ct.Update(t, ch); err != nil {
			k.counts.failed.Add(1)
			return
		}
		k.counts.renewed.Add(1)
	}
	k.mu.Lock()
	cc.renewed, cc.tracked = used, true
	k.mu.Unlock()
}

// ctRenewal is what renew would set: a timeout, and status bits.
type ctRenewal struct {
	Timeout time.Duration
	Status  uint32
}

// timeout is what the kernel would set on the entry e of connection cc at
// a packet (nf_conntrack_proto_udp.c, _tcp.c): UDP seen both ways and
// still active two seconds after it started becomes ASSURED and gets the
// stream timeout.
func (k *CtKeeper) timeout(cc *ctConn, proto uint8, e conntrack.Entry) ctRenewal {
	if proto == unix.IPPROTO_TCP {
		return ctRenewal{Timeout: k.tmo.tcpEstablished}
	}
	k.mu.Lock()
	if cc.seen.IsZero() {
		cc.seen = time.Now()
	}
	old := time.Since(cc.seen) > 2*time.Second
	k.mu.Unlock()
	switch {
	case e.Status&conntrack.Assured != 0:
		return ctRenewal{Timeout: k.tmo.udpStream}
	case e.Status&conntrack.SeenReply != 0 && old:
		return ctRenewal{Timeout: k.tmo.udpStream, Status: conntrack.Assured}
	}
	return ctRenewal{Timeout: k.tmo.udp}
}
