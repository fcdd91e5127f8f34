package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/netns"
)

// ModeFastpath is the cached fast path alone (docs/fastpath.md); falcon's
// implementation runs it beside steering with the setting fastpath=true.
const ModeFastpath = "fastpath"

const (
	// fastRenew: how often the agent tells the programs it is alive, and
	// fastAlive how long they trust their caches without hearing so.
	fastRenew = 250 * time.Millisecond
	fastAlive = time.Second
	// fastIdle: an entry unused this long is removed (the LRU maps also
	// evict the least used when full).
	fastIdle = time.Minute
	// fastStatsFile is what status reads of a running fast path.
	fastStatsFile = "fastpath.json"
)

// fastPath runs the fast path for one host namespace: programs on its NIC
// and every container's host-side veth, the whole cache invalidated on any
// announced change of rules, routes, neighbours or links, and on any
// container coming or going.
type fastPath struct {
	mu     sync.Mutex
	fp     *datapath.FastPath
	hooks  map[string]datapath.Hook
	far    []string // unreachable's, at the last sync
	cancel context.CancelFunc
	bg     sync.WaitGroup
	ct     *datapath.CtKeeper // nil where the namespace tracks no connections
	ns     string
	log    *slog.Logger
	// off: why the host's ruleset keeps the fast path off ("": it does not).
	off string
	// est: the ruleset is safe for established connections alone, so
	// every flow waits for conntrack to have it ESTABLISHED.
	est bool
	// h, ov: the host and overlay of the last sync, for a resync on a
	// change of tc configuration.
	h  *Host
	ov *discover.Overlay
	// invalidations: caches dropped since start (by announcements and
	// container changes).
	invalidations atomic.Uint64
	// learned bounds the flushes that learned neighbours and FDB entries,
	// which containers can cause, force.
	learned flushLimiter
	// whole: host-side veths by ifindex, which TCP aggregates their
	// containers take whole, as last told to the programs.
	whole map[int]datapath.Whole
	// slowAgg: host-side veths by ifindex whose containers take no TCP
	// aggregate whole, why (status).
	slowAgg map[int]string
	// readers: container namespaces by name, read by refreshWhole.
	readers map[string]*nsReader
	// rps: host-side veths (by hook key: name) whose RPS keeps what their
	// containers send in order (fastpath_order.go).
	rps map[string]string
	// counts: the entry counts last published (fastpath_counts.go).
	counts entryCounts
	// running: started and not stopping, so fp's maps may be read (f.mu).
	running bool
}

// FastReport is the fast path's part of falcon status.
type FastReport struct {
	datapath.FastStats
	Invalidations uint64 `json:"invalidations"`
	// LearnedFlushes: invalidations that learned neighbours or FDB entries
	// caused (at most one a second); LearnedWaited: such announcements that
	// waited for the next of them.
	LearnedFlushes uint64   `json:"learned_flushes"`
	LearnedWaited  uint64   `json:"learned_waited"`
	Hooks          []string `json:"hooks"`
	// Unreachable: containers' host-side veths left to the slow path, why.
	Unreachable []string `json:"unreachable,omitempty"`
	// SlowAggregates: containers whose TCP aggregates take the slow path
	// (fastpath_whole.go), why.
	SlowAggregates []string `json:"slow_aggregates,omitempty"`
	// SenderRPS: the host-side veths whose RPS the fast path set, so that
	// what their containers send leaves in order (fastpath_order.go).
	SenderRPS []string `json:"sender_rps,omitempty"`
	// Off: why the host's ruleset, judged again at its last change, keeps
	// the fast path off; empty while it runs.
	Off string `json:"off,omitempty"`
	// Conntrack: how the host's conntrack is kept in step.
	Conntrack *datapath.CtReport `json:"conntrack,omitempty"`
	Updated   time.Time          `json:"updated"`
	// EntriesCounted: when the entry counts were taken, which a full
	// cache makes less often than Updated (fastpath_counts.go).
	EntriesCounted time.Time `json:"entries_counted"`
}

// checkFastPath says why the fast path cannot run on ov, if it cannot.
func checkFastPath(h *Host, ov *discover.Overlay) error {
	if err := fastPathFits(h, ov); err != nil {
		return err
	}
	if reason, _ := unsafeHost(h.Opts.Netns, ov); reason != "" {
		return fmt.Errorf("the fast path would skip what the host decides per packet: network namespace %s has %s", netns.Label(h.Opts.Netns), reason)
	}
	return nil
}

// fastPathFits is checkFastPath but the host's rules and tc policy, which
// the running fast path judges again at every change (off while unsafe).
func fastPathFits(h *Host, ov *discover.Overlay) error {
	if err := datapath.FastPathSupported(); err != nil {
		return err
	}
	if err := checkOverlay(h, ov); err != nil {
		return err
	}
	for _, vx := range ov.Role(discover.RoleOverlay) {
		if vx.VXLAN == nil || vx.VXLAN.FlowBased {
			return fmt.Errorf("the fast path cannot cache %s: a flow-based (external) VXLAN device takes its tunnel from per-packet metadata", vx.Name)
		}
	}
	for _, nic := range ov.Role(discover.RoleNIC) {
		if nic.Netns != h.Opts.Netns {
			return fmt.Errorf("the fast path needs the NIC in the host namespace; %s is in %s", nic.Name, netns.Label(nic.Netns))
		}
		if err := ipv4Underlay(nic); err != nil {
			return err
		}
	}
	return reachable(h, ov)
}

// unreachable lists the containers' host-side veths the fast path leaves to
// the slow path, by key, with why: bpf_redirect_peer crosses from a veth in
// the program's own namespace to its peer, and the NIC's program runs in
// the host namespace (Docker's swarm keeps them in its overlay's
// namespace); and a veth with tc policy of its own (a root qdisc, another's
// filters) that a redirected packet would skip.
func unreachable(h *Host, ov *discover.Overlay) map[string]string {
	out := map[string]string{}
	for _, d := range ov.Role(discover.RoleHostVeth) {
		if d.Netns != h.Opts.Netns {
			out[d.Key()] = fmt.Sprintf("%s in %s: not in the NIC's namespace, where bpf_redirect_peer must start", d.Name, netns.Label(d.Netns))
			continue
		}
		why, err := datapath.ForeignTC(d.Netns, d.Ifindex, true)
		if err != nil {
			why = fmt.Sprintf("its tc configuration could not be read (%v)", err)
		}
		if why != "" {
			out[d.Key()] = fmt.Sprintf("%s: %s, which the fast path would skip", d.Name, why)
		}
	}
	return out
}

func reasons(far map[string]string) []string {
	return slices.Sorted(maps.Values(far))
}

// reachable refuses an overlay none of whose containers the fast path can
// reach (some unreachable among others are left to the slow path and named
// in status).
func reachable(h *Host, ov *discover.Overlay) error {
	veths := ov.Role(discover.RoleHostVeth)
	far := unreachable(h, ov)
	if len(veths) > 0 && len(far) == len(veths) {
		return fmt.Errorf("the fast path cannot reach any container of %s: %s (bpf_redirect_peer crosses only from a veth in the program's own namespace, and skips the veth's own tc policy)",
			netns.Label(h.Opts.Netns), strings.Join(reasons(far), "; "))
	}
	return nil
}

// ipv4Underlay refuses an overlay over IPv6: the VXLAN device must then set
// the outer UDP checksum, over the whole packet, which tc cannot afford.
func ipv4Underlay(nic discover.Device) error {
	var v4 int
	err := netns.Do(nic.Netns, func() error {
		l, err := netlink.LinkByIndex(nic.Ifindex)
		if err != nil {
			return err
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_V4)
		v4 = len(as)
		return err
	})
	if err != nil {
		return fmt.Errorf("read the addresses of %s: %w", nic.Name, err)
	}
	if v4 == 0 {
		return fmt.Errorf("the fast path needs an IPv4 underlay: %s has no IPv4 address (over IPv6 the VXLAN device sets an outer UDP checksum, which the fast path does not compute)", nic.Name)
	}
	return nil
}

func vxlanPorts(ov *discover.Overlay) []int {
	var ports []int
	for _, vx := range ov.Role(discover.RoleOverlay) {
		if vx.VXLAN != nil && !slices.Contains(ports, vx.VXLAN.Port) && len(ports) < datapath.MaxPorts {
			ports = append(ports, vx.VXLAN.Port)
		}
	}
	return ports
}

// start loads the programs, attaches them and begins watching for changes.
func (f *fastPath) start(h *Host, ov *discover.Overlay) error {
	fds, err := openWatch(h.Opts.Netns)
	if err != nil {
		return err
	}
	fp, err := datapath.NewFastPath(vxlanPorts(ov))
	if err != nil {
		closeAll(fds)
		return err
	}
	f.fp, f.hooks, f.ns, f.log, f.h, f.ov = fp, map[string]datapath.Hook{}, h.Opts.Netns, h.Log(), h, ov
	f.whole, f.slowAgg, f.rps = map[int]datapath.Whole{}, map[int]string{}, map[string]string{}
	f.readers = map[string]*nsReader{}
	f.learned.period = fastLearnedFlush
	if h.Opts.SenderRPS {
		if err := fp.SetSenderOrder(h.Opts.CPUs); err != nil {
			closeAll(fds)
			return errors.Join(err, f.stop(h))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	if f.ct, err = datapath.KeepConntrack(ctx, &f.bg, h.Opts.Netns, fp, h.Log()); err != nil {
		closeAll(fds)
		return errors.Join(err, f.stop(h))
	}
	// The conntrack gate the ruleset needs, before anything is learned.
	f.judge()
	if err := f.sync(h, ov); err != nil {
		closeAll(fds)
		return errors.Join(err, f.stop(h))
	}
	if err := fp.Renew(fastAlive); err != nil {
		closeAll(fds)
		return errors.Join(err, f.stop(h))
	}
	f.bg.Add(2)
	go func() {
		defer f.bg.Done()
		if err := watch(ctx, fds, announced, f.changed); err != nil {
			// Blind to changes, the caches can't be trusted: the
			// programs stop using them when renewal stops.
			h.Log().Error("fast path: watching for changes failed; the fast path is off", "err", err)
			cancel()
		}
	}()
	go func() {
		defer f.bg.Done()
		f.keepAlive(ctx, h)
	}()
	f.mu.Lock()
	f.running = true
	f.mu.Unlock()
	h.Log().Info("fast path on", "hooks", len(f.hooks), "ports", vxlanPorts(ov))
	return nil
}

func (f *fastPath) invalidate() {
	if err := f.fp.Invalidate(); err == nil {
		f.invalidations.Add(1)
	}
}

// keepAlive renews the programs' trust, ages idle entries and publishes
// the statistics, until ctx ends.
func (f *fastPath) keepAlive(ctx context.Context, h *Host) {
	tick := time.NewTicker(fastRenew)
	defer tick.Stop()
	hadLegacy := legacyAppeared(f.ns) // as start judged them
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := f.fp.Renew(fastAlive); err != nil {
			h.Log().Error("fast path: renew", "err", err)
		}
		if n%4 == 0 {
			f.mu.Lock()
			f.refreshWhole()
			f.mu.Unlock()
			f.publish(h)
			if legacy := legacyAppeared(f.ns); legacy != hadLegacy {
				hadLegacy = legacy
				f.judge()
			}
		}
		if n%40 == 0 {
			f.fp.Age(fastIdle)
		}
	}
}

func (f *fastPath) publish(h *Host) {
	r, err := f.report()
	if err != nil {
		return
	}
	fileutil.PublishJSON(filepath.Join(h.Dir, fastStatsFile), r, 0o600)
}

func (f *fastPath) report() (*FastReport, error) {
	st, err := f.fp.Counted()
	if err != nil {
		return nil, err
	}
	if err := f.counts.fill(f.fp, &st); err != nil {
		return nil, err
	}
	r := &FastReport{FastStats: st, Invalidations: f.invalidations.Load(), Updated: time.Now(), EntriesCounted: f.counts.at,
		Conntrack: &datapath.CtReport{}}
	r.LearnedFlushes, r.LearnedWaited = f.learned.counts()
	if f.ct != nil {
		r.Conntrack = f.ct.Report()
	}
	f.mu.Lock()
	for _, hk := range f.hooks {
		r.Hooks = append(r.Hooks, fmt.Sprintf("%s (%s)", hk.Name, hk.Role))
	}
	r.Unreachable, r.Off = f.far, f.off
	r.SenderRPS = slices.Sorted(maps.Values(f.rps))
	r.SlowAggregates = slices.Sorted(maps.Values(f.slowAgg))
	f.mu.Unlock()
	return r, nil
}

// sync attaches to the NIC and every host-side veth of ov and detaches from
// those gone; any change invalidates the caches.
func (f *fastPath) sync(h *Host, ov *discover.Overlay) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]datapath.Hook{}
	far := unreachable(h, ov)
	f.far, f.h, f.ov = reasons(far), h, ov
	for _, d := range ov.Devices {
		role := datapath.HookRole("")
		switch {
		case d.Role == discover.RoleNIC:
			role = datapath.HookFastNIC
		case d.Role == discover.RoleHostVeth && far[d.Key()] == "":
			role = datapath.HookFastVeth
		case d.Role == discover.RoleContainer:
			role = datapath.HookFastPod
		default:
			continue
		}
		want[d.Key()] = datapath.Hook{Netns: d.Netns, Ifindex: d.Ifindex, Name: d.Name, Role: role}
	}
	changed := false
	for k, hk := range f.hooks {
		if _, ok := want[k]; !ok {
			if err := f.fp.Detach(hk); err != nil {
				return err
			}
			h.RemoveHooks(hk)
			delete(f.hooks, k)
			changed = true
		}
	}
	for k, hk := range want {
		if _, ok := f.hooks[k]; ok {
			continue
		}
		if err := h.AddHooks(hk); err != nil {
			return err
		}
		if err := f.fp.Attach(hk); err != nil {
			return err
		}
		f.hooks[k] = hk
		changed = true
	}
	if changed {
		f.invalidate()
	}
	f.refreshWhole()
	f.syncSenderRPS(h)
	return nil
}

func (f *fastPath) stop(h *Host) error {
	if f.cancel != nil {
		f.cancel()
	}
	f.bg.Wait()
	f.learned.stop()
	f.mu.Lock()
	f.closeReaders(nil)
	f.running = false
	f.mu.Unlock()
	if f.fp == nil {
		return nil
	}
	err := f.fp.Close()
	var hooks []datapath.Hook
	for _, hk := range f.hooks {
		hooks = append(hooks, hk)
	}
	f.hooks = nil
	os.Remove(filepath.Join(h.Dir, fastStatsFile))
	return errors.Join(err, h.RemoveHooks(hooks...))
}

// fastMode is the fast path alone.
type fastMode struct {
	fast  fastPath
	ready atomic.Bool
}

func (m *fastMode) Check(h *Host, ov *discover.Overlay) error { return checkFastPath(h, ov) }

func (m *fastMode) Start(h *Host, ov *discover.Overlay) error {
	if err := m.fast.start(h, ov); err != nil {
		return err
	}
	m.ready.Store(true)
	return nil
}

func (m *fastMode) Update(h *Host, ov *discover.Overlay) error { return m.fast.sync(h, ov) }
func (m *fastMode) Ready() bool                                { return m.ready.Load() }
func (m *fastMode) Stop(h *Host) error                         { m.ready.Store(false); return m.fast.stop(h) }

// readFastReport is a running agent's last published fast path report.
func readFastReport(dir string) *FastReport {
	var r FastReport
	b, err := os.ReadFile(filepath.Join(dir, fastStatsFile))
	if err != nil || json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}
