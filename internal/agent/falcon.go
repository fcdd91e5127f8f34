package agent

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/policy"
)

// overlaySalt sets the hook on a VXLAN device apart from the NIC's hook.
// Both see the same inner flow hash, and the NIC's hook salts its choice
// with the VXLAN device's ifindex (the device whose stage it steers, as the
// paper does); were the VXLAN device's hook, which steers the containers'
// stage, salted with the same ifindex, it would pick the same CPU for every
// flow and the two stages would never run apart. The containers' own
// ifindexes can't serve: the hook runs before the bridge or route picks the
// container, and inside pods they are all alike (2 or 3).
const overlaySalt = 1 << 30

// falconMode steers each stage with the BPF datapath.
type falconMode struct {
	dp  *datapath.Datapath
	cfg datapath.Config
	// mu orders what attaches and detaches: the agent's updates against
	// the engagement test standing down and coming back (standdown.go).
	mu      sync.Mutex
	ov      *discover.Overlay                   // the latest, to attach to when coming back
	hooks   map[string]datapath.Hook            // attached, by device key
	splits  map[string]datapath.SplitHook       // NICs whose stage is split (split.go)
	applied map[string]bool                     // devices whose RPS is set, by device key and name
	stages  map[datapath.StageDev]datapath.Hook // registered with the ordering guard (guard.go)
	nss     atomic.Pointer[[]string]            // the steered containers' namespaces, for the engagement
	// eng runs the engagement policy (internal/policy) over this mode;
	// counters and causes are its, kept here for Activity, which may run
	// beside Stop.
	eng      *policy.Engine
	counters policy.Counters
	causes   policy.Log
	// published, stale, lastSample: the sampler's work, for the metrics
	// (activity.go).
	published, stale, lastSample atomic.Uint64
	// loaded is dp for Activity, which may run beside Stop (a metrics
	// scrape): set once loaded and never cleared.
	loaded atomic.Pointer[datapath.Datapath]
	// fast is the cached fast path, with the setting fastpath=true or
	// auto; fastOn says it started, fastWhy why it did not (auto).
	fast    fastPath
	fastOn  bool
	fastWhy string
}

func (m *falconMode) Check(h *Host, ov *discover.Overlay) error {
	if err := datapath.Supported(); err != nil {
		return err
	}
	// Host NICs alone need no overlay: the host's own sockets receive.
	if len(ov.Role(discover.RoleHostNIC)) == 0 || len(ov.Role(discover.RoleOverlay)) > 0 {
		if err := checkOverlay(h, ov); err != nil {
			return err
		}
	}
	cfg := m.config(h, ov)
	if err := cfg.Validate(); err != nil {
		return err
	}
	if h.Opts.Fastpath && !h.Opts.FastpathAuto {
		if err := checkFastPath(h, ov); err != nil {
			return err
		}
	}
	return m.checkSplit(h, ov)
}

// config is the datapath configuration for the options and overlay.
func (m *falconMode) config(h *Host, ov *discover.Overlay) datapath.Config {
	cfg := datapath.DefaultConfig()
	cfg.CPUs = slices.Clone(h.Opts.CPUs)
	cfg.Threshold = h.Opts.Threshold
	cfg.Policy = h.Opts.Policy // one not registered: Validate says so
	if e, ok := policy.Lookup(h.Opts.Policy); ok {
		cfg.Policy = e.Datapath
	}
	cfg.AlwaysOn = h.Opts.AlwaysOn
	cfg.GuardTimeout = h.Opts.GuardTimeout
	// A decision is no better informed than the load it was made with.
	cfg.Recheck = h.Opts.Interval
	cfg.PerPacket = h.Opts.PerPacket
	// Load older than a few missed samples switches steering off; a quiet
	// sampler's samples are maxSampleGap apart.
	cfg.StaleAfter = max(cfg.StaleAfter, 3*policy.MaxSampleGap(h.Opts.Interval))
	var ports []uint16
	for _, d := range ov.Role(discover.RoleOverlay) {
		if p := uint16(d.VXLAN.Port); p != 0 && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	if len(ports) > 0 {
		cfg.VXLANPorts = ports[:min(len(ports), datapath.MaxPorts)]
	}
	cfg.SplitCPUs = slices.Clone(h.Opts.SplitCPUs)
	cfg.SplitProto = h.Opts.SplitProto
	cfg.Batch = h.Opts.Batch
	cfg.ElephantBps = h.Opts.Elephant
	cfg.ReorderUDP = h.Opts.AllowReorder
	return cfg
}

// Start attaches the hooks before it sets RPS: until the hooks run, RPS
// would spread each flow by the kernel's own hash, and the first packets
// the hooks keep inline would overtake those. Packets that passed before
// the hooks carry no hash of theirs either, so RPS waits a guard timeout
// for them to leave the queues (TestNoReorderingSaturated saw 9 datagrams
// overtaken when RPS came right after the attach). Meanwhile the datapath
// drains (every flow inline, which RPS does not touch: hash 0), so that no
// flow is steered before RPS carries it; the hooks' counts are exact from
// their first packet (marks), so flows running through the attach may
// move as soon as RPS is set.
func (m *falconMode) Start(h *Host, ov *discover.Overlay) error {
	m.hooks, m.applied = map[string]datapath.Hook{}, map[string]bool{}
	m.cfg = m.config(h, ov)
	var err error
	if m.dp, err = datapath.Load(m.cfg, h.PinDir); err != nil {
		return err
	}
	m.loaded.Store(m.dp)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setOverlay(ov)
	if m.eng, err = m.engine(h, actuator{m, h}); err != nil {
		return err
	}
	ctx, err := m.startPath(h, ov)
	if err != nil {
		return err
	}
	if err := m.startFast(h, ov); err != nil {
		return err
	}
	// The engagement starts once everything is attached: its idle time
	// counts from here, not from before a slow attach.
	m.eng.Run(ctx)
	return nil
}

// attachAll attaches the hooks and sets RPS in the order Start explains.
func (m *falconMode) attachAll(h *Host, ov *discover.Overlay, strict bool) error {
	if err := m.dp.SetDraining(true); err != nil {
		return err
	}
	if err := m.syncHooks(h, ov, strict); err != nil {
		return err
	}
	time.Sleep(m.cfg.GuardTimeout)
	if err := m.setRPS(h, ov, strict); err != nil {
		return err
	}
	return m.dp.SetDraining(false)
}

func (m *falconMode) Update(h *Host, ov *discover.Overlay) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setOverlay(ov)
	var errs []error
	if m.fastOn {
		errs = append(errs, m.fast.sync(h, ov))
	} else {
		errs = append(errs, m.startFast(h, ov))
	}
	if cfg := m.config(h, ov); !slices.Equal(cfg.VXLANPorts, m.cfg.VXLANPorts) {
		if err := m.dp.SetConfig(cfg); err != nil {
			errs = append(errs, err)
		} else {
			m.cfg = cfg
		}
	}
	if m.dp.Config().StoodDown {
		return errors.Join(errs...) // the overlay is attached to when falcon comes back
	}
	if m.gainsHooks(h, ov) {
		// A new hook's next devices get RPS after it. A flow aimed at one
		// of them before runs inline there, whatever its entry says, and
		// would be overtaken once RPS is set: so every flow goes inline
		// first (the ones aimed at new devices arrive promptly, as they
		// run inline; others may stay steered, on devices whose RPS this
		// does not change), then the attach runs as at Start.
		m.drain(h, standDownDrain)
		return errors.Join(append(errs, m.attachAll(h, ov, false))...)
	}
	errs = append(errs, m.syncHooks(h, ov, false), m.setRPS(h, ov, false))
	return errors.Join(errs...)
}

// gainsHooks: whether ov has a hook to attach that is not attached.
func (m *falconMode) gainsHooks(h *Host, ov *discover.Overlay) bool {
	for k := range wantHooks(h, ov) {
		if _, ok := m.hooks[k]; !ok {
			return true
		}
	}
	return false
}

func (m *falconMode) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.eng != nil && m.eng.Running() && (len(m.hooks) > 0 || m.dp.Config().StoodDown)
}

func (m *falconMode) Stop(h *Host) error {
	if m.eng != nil {
		m.eng.Stop()
	}
	fastErr := m.fast.stop(h)
	if m.dp == nil {
		return fastErr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drain(h, h.Opts.DrainTimeout)
	// RPS goes back while the hooks still keep every flow inline: once they
	// are gone, RPS would spread the flows by the kernel's hash.
	if err := h.journal.Restore(); err != nil {
		return fmt.Errorf("restore values: %w", err)
	}
	err := m.dp.Close() // detaches every hook and unpins the maps
	if err == nil {
		var hs []datapath.Hook
		for _, hk := range m.hooks {
			hs = append(hs, hk)
		}
		for s, hk := range m.stages {
			if s.Last {
				hs = append(hs, hk)
			}
		}
		h.RemoveHooks(hs...)
		m.forgetSplits(h)
	}
	m.dp, m.hooks, m.stages = nil, nil, nil
	return errors.Join(err, fastErr)
}

// steered lists the devices whose stage falcon steers, so whose RPS must
// list exactly S: the VXLAN devices (steered from the NIC) and the
// containers' ends behind a VXLAN device with a hook.
func steered(ov *discover.Overlay) []discover.Device {
	out := ov.Role(discover.RoleOverlay)
	for _, c := range ov.Role(discover.RoleContainer) {
		if c.Peer != nil && hasOverlayIn(ov, c.Peer.Netns) {
			out = append(out, c)
		}
	}
	return out
}

func hasOverlayIn(ov *discover.Overlay, ns string) bool {
	for _, d := range ov.Role(discover.RoleOverlay) {
		if d.Netns == ns {
			return true
		}
	}
	return false
}

// setRPS sets RPS on devices not set yet. A container that vanished on the
// way is no error (it is gone, with its settings); on the first call the
// VXLAN devices must succeed.
func (m *falconMode) setRPS(h *Host, ov *discover.Overlay, strict bool) error {
	var errs []error
	now := map[string]bool{}
	for _, d := range steered(ov) {
		k := d.Key() + "/" + d.Name
		now[k] = true
		if m.applied[k] {
			continue
		}
		err := h.ApplyFunc(d.Netns, RPSChanges(d.Name, h.Opts.CPUs, "0"))
		switch {
		case err == nil:
			m.applied[k] = true
			if d.Role == discover.RoleContainer {
				m.hookLog(h)("container followed: RPS set", "container", d.String(), "cpus", cpuset.Format(h.Opts.CPUs))
			}
		case strict && d.Role == discover.RoleOverlay:
			return fmt.Errorf("set RPS of %s: %w", d, err)
		default:
			errs = append(errs, fmt.Errorf("set RPS of %s: %w", d, err))
		}
	}
	gone := false
	for k := range m.applied {
		if !now[k] {
			delete(m.applied, k)
			h.Log().Info("device gone: no longer followed", "device", k)
			gone = true
		}
	}
	if gone {
		errs = append(errs, h.journal.Prune())
	}
	return errors.Join(errs...)
}

// wantHooks: a NIC hook on every NIC steers its VXLAN devices' stage; a
// hook on every VXLAN device with containers behind it steers theirs. A
// NIC under several VXLAN devices (a Docker swarm node: the ingress
// network's and each overlay network's) cannot tell before decapsulation
// which one a packet goes to; its choice is salted with the lowest of
// their ifindexes, so that it does not depend on the order discovery found
// them in.
func wantHooks(h *Host, ov *discover.Overlay) map[string]datapath.Hook {
	want := map[string]datapath.Hook{}
	for _, vx := range ov.Role(discover.RoleOverlay) {
		if vx.VXLAN != nil && vx.VXLAN.NIC != 0 {
			if nic, ok := ov.Find(h.Opts.Netns, vx.VXLAN.NIC); ok {
				if w, dup := want[nic.Key()]; !dup || vx.Ifindex < w.NextIfindex {
					want[nic.Key()] = datapath.Hook{Netns: nic.Netns, Ifindex: nic.Ifindex, Name: nic.Name,
						Role: datapath.HookOnNIC, NextIfindex: vx.Ifindex}
				}
			}
		}
		behind := false
		for _, c := range ov.Role(discover.RoleContainer) {
			behind = behind || (c.Peer != nil && c.Peer.Netns == vx.Netns)
		}
		if behind {
			want[vx.Key()] = datapath.Hook{Netns: vx.Netns, Ifindex: vx.Ifindex, Name: vx.Name,
				Role: datapath.HookOnOverlay, NextIfindex: vx.Ifindex | overlaySalt}
		}
	}
	return want
}

// syncHooks attaches the hooks the overlay needs and detaches the others.
// Each hook is recorded in the state before it is attached.
func (m *falconMode) syncHooks(h *Host, ov *discover.Overlay, strict bool) error {
	want := wantHooks(h, ov)
	var errs []error
	if err := m.syncStages(h, ov); err != nil {
		if strict {
			return err
		}
		errs = append(errs, err)
	}
	for k, old := range m.hooks {
		if nw, ok := want[k]; ok && nw == old {
			continue
		}
		if err := m.dp.Detach(old); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(m.hooks, k)
		h.RemoveHooks(old)
		m.hookLog(h)("hook detached", "hook", old.String(), "role", old.Role)
	}
	for k, hk := range want {
		if _, ok := m.hooks[k]; ok {
			continue
		}
		if err := h.AddHooks(hk); err != nil {
			return err
		}
		if err := m.dp.Attach(hk); err != nil {
			h.RemoveHooks(hk)
			if strict {
				return err
			}
			errs = append(errs, err)
			continue
		}
		m.hooks[k] = hk
		m.hookLog(h)("hook attached", "hook", hk.String(), "role", hk.Role)
	}
	if err := m.syncSplits(h, ov, want, strict); err != nil {
		if strict {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (m *falconMode) containerNetns() []string {
	if p := m.nss.Load(); p != nil {
		return *p
	}
	return nil
}

// hookLog says a hook's attach or detach: at Info, except while the
// engagement test switches falcon on and off the path every few seconds.
func (m *falconMode) hookLog(h *Host) func(msg string, args ...any) {
	if m.eng != nil && m.eng.Probing() {
		return h.Log().Debug
	}
	return h.Log().Info
}

// setOverlay keeps the latest overlay, to attach to when coming back, and
// its containers' namespaces (and a host NIC's, the host's own sockets),
// whose deliveries the engagement test counts also while falcon is off the
// path.
func (m *falconMode) setOverlay(ov *discover.Overlay) {
	m.ov = ov
	var nss []string
	for _, d := range append(steered(ov), ov.Role(discover.RoleHostNIC)...) {
		if (d.Role == discover.RoleContainer || d.Role == discover.RoleHostNIC) && !slices.Contains(nss, d.Netns) {
			nss = append(nss, d.Netns)
		}
	}
	m.nss.Store(&nss)
}
