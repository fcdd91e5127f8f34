package datapath

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/falconnet/falcon/internal/netns"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The receiving half of the ordering guard (bpf/guard.c): a tc program on
// each container's end (AttachArrival) and programs on napi:napi_poll and
// skb:kfree_skb that count, per
// flow, the segments the last stage has delivered (once the NAPI poll that
// carried them returns) or that were dropped on the way. A hook moves a flow only when they match what it sent
// (bpf/guard.h).

// arriveProgName is the guard's arrival counter (bpf/guard.c), and
// atNICProgName its twin on host NICs.
const (
	arriveProgName = "falcon_arrive"
	atNICProgName  = "falcon_at_nic"
)

type guardState struct {
	progs   []*ebpf.Program
	tracing []*ebpf.Program // attached to tracepoints, not to devices
	links   []link.Link     // tracing's, while not stood down
	arrive  *ebpf.Program   // falcon_arrive, shared by every container's end
	atNIC   *ebpf.Program   // falcon_at_nic, shared by every host NIC
}

func (g *guardState) close() error {
	errs := []error{g.detachTracing()}
	for _, p := range g.progs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// openGuard loads and attaches the counting programs (d.maps loaded).
func (d *Datapath) openGuard() (err error) {
	spec, err := loadGuard()
	if err != nil {
		return err
	}
	var objs struct {
		Arrive  *ebpf.Program `ebpf:"falcon_arrive"`
		AtNIC   *ebpf.Program `ebpf:"falcon_at_nic"`
		Drop    *ebpf.Program `ebpf:"falcon_guard_drop"`
		Poll    *ebpf.Program `ebpf:"falcon_guard_poll"`
		Kthread *ebpf.Program `ebpf:"falcon_guard_kthread"`
		Sleep   *ebpf.Program `ebpf:"falcon_guard_sleep"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: d.mapsByName()}); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load BPF guard programs: %+v", ve)
		}
		return fmt.Errorf("load BPF guard programs: %w", err)
	}
	tracing := []*ebpf.Program{objs.Drop, objs.Poll, objs.Kthread, objs.Sleep}
	g := &guardState{progs: append(slices.Clone(tracing), objs.Arrive, objs.AtNIC), arrive: objs.Arrive, atNIC: objs.AtNIC,
		tracing: tracing}
	if err := g.attachTracing(d.pinLink); err != nil {
		g.close()
		return err
	}
	d.guard = g
	return nil
}

// attachTracing attaches the tracing programs; pin keeps them counting
// drops through a killed agent, as its hooks keep running.
func (g *guardState) attachTracing(pin func(link.Link) error) error {
	for _, p := range g.tracing {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err == nil {
			if err = pin(l); err != nil {
				l.Close()
			}
		}
		if err != nil {
			g.detachTracing()
			return fmt.Errorf("attach guard program %s: %w", p, err)
		}
		g.links = append(g.links, l)
	}
	return nil
}

func (g *guardState) detachTracing() error {
	var errs []error
	for _, l := range g.links {
		errs = append(errs, closeLink(l))
	}
	g.links = nil
	return errors.Join(errs...)
}

// StandDown takes the guard's tracepoint programs off the kernel (on) or
// puts them back (off), so that a datapath whose hooks the caller
// detached costs the machine nothing, not even a program run per NAPI
// poll. Every hook, split hook and arrival counter must be detached
// first, and are attached again only after: packets pass uncounted while
// it stands down, so coming back forgets every flow's counts and moves the
// epoch on; the hooks' marks then tell their own packets from the older
// ones, as after the first attach. The state shows in Config().StoodDown.
func (d *Datapath) StandDown(on bool) error {
	d.mu.Lock()
	attached := len(d.hooks) + len(d.splits) + len(d.arrivals)
	d.mu.Unlock()
	if attached > 0 {
		return fmt.Errorf("stand down: %d hooks still attached", attached)
	}
	if d.Config().StoodDown == on {
		return nil
	}
	if on {
		if err := d.guard.detachTracing(); err != nil {
			return err
		}
		return d.setState(func(c *Config) { c.StoodDown = true })
	}
	if err := d.forgetFlows(); err != nil {
		return err
	}
	if err := d.guard.attachTracing(d.pinLink); err != nil {
		return err
	}
	return d.setState(func(c *Config) { c.StoodDown = false })
}

// MaxEpoch is the largest epoch a mark carries (bpf/datapath.h MARK_EPOCH).
const MaxEpoch = 0x1ff

// forgetFlows empties the guard's per-flow counts and moves the epoch on:
// a marked packet still queued from before must not count against the
// counts that start now.
func (d *Datapath) forgetFlows() error {
	if err := d.setState(func(c *Config) { c.Epoch = c.Epoch%MaxEpoch + 1 }); err != nil {
		return err
	}
	for _, m := range []*ebpf.Map{d.maps.FalconFlowlets, d.maps.FalconDone} {
		var keys [][]byte
		var k any // nil: the first key
		for {
			next, err := m.NextKeyBytes(k)
			if err != nil {
				return fmt.Errorf("forget flows: %w", err)
			}
			if next == nil {
				break
			}
			keys, k = append(keys, next), next
		}
		for _, k := range keys {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("forget flows: %w", err)
			}
		}
	}
	return nil
}

// StageDev is a device on the overlay's receive path the guard counts at:
// the last stage (Last: a container's end), where every arrival counts, or
// a device on the way (a VXLAN device), where only what its backlog drops
// counts. NetnsIno identifies the device's namespace.
type StageDev struct {
	NetnsIno uint32
	Ifindex  int
	Last     bool
}

// Stage kinds, as enum stage_kind in bpf/datapath.h.
const (
	stagePath = 0
	stageLast = 1
)

// AddStage registers a device with the guard. A hook's flows can move
// safely only when the last stage they reach is registered: elsewhere
// their packets are never counted, and the guard waits for the timeout.
func (d *Datapath) AddStage(s StageDev) error {
	kind := uint32(stagePath)
	if s.Last {
		kind = stageLast
	}
	k := falconStageDev{NetnsIno: s.NetnsIno, Ifindex: uint32(s.Ifindex)}
	if err := d.maps.FalconStages.Put(&k, kind); err != nil {
		return fmt.Errorf("register stage device %d in netns %d: %w", s.Ifindex, s.NetnsIno, err)
	}
	return nil
}

// AttachArrival puts the guard's arrival counter on the ingress of h, a
// container's end or a host NIC (h.HostNIC; registered with AddStage as
// the last stage), with tcx where the kernel has it and clsact otherwise.
// Attach it before any hook steers into that end: arrivals before it are
// in no count, which only makes the guard wait. One program serves every
// container's end, another every host NIC.
func (d *Datapath) AttachArrival(h Hook) error {
	h.Role, h.Egress = HookArrival, false
	if err := h.validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.guard == nil {
		return errors.New("attach arrival counter: the guard is not loaded")
	}
	if _, ok := d.arrivals[h.key()]; ok {
		return nil
	}
	a := &attachment{hook: h, prog: d.guard.arrive, shared: true}
	if h.HostNIC {
		a.prog = d.guard.atNIC
	}
	err := netns.Do(h.Netns, func() error {
		if _, err := hookDevice(h, "arrival counter"); err != nil {
			return err
		}
		return d.attachTC(a)
	})
	if err != nil {
		return err
	}
	d.arrivals[h.key()] = a
	return nil
}

// DetachArrival removes the arrival counter from h (not attached, or the
// container gone, is no error).
func (d *Datapath) DetachArrival(h Hook) error {
	h.Role, h.Egress = HookArrival, false
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.detachLocked(d.arrivals, h)
}

// RemoveStage forgets a stage device (gone already is fine).
func (d *Datapath) RemoveStage(s StageDev) error {
	k := falconStageDev{NetnsIno: s.NetnsIno, Ifindex: uint32(s.Ifindex)}
	if err := d.maps.FalconStages.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unregister stage device %d in netns %d: %w", s.Ifindex, s.NetnsIno, err)
	}
	return nil
}

// SetEngaged tells the adaptive policy whether steering pays (the agent's
// engagement test); flows move accordingly, each under its guard.
func (d *Datapath) SetEngaged(on bool) error {
	return d.setState(func(c *Config) { c.Engaged = on })
}

var possible = sync.OnceValue(func() int {
	n, err := ebpf.PossibleCPU()
	if err != nil || n < 1 || n > MaxCPUs {
		return MaxCPUs
	}
	return n
})

func possibleCPUs() int { return possible() }

func (d *Datapath) attachClock() uint64 {
	if d.clock != nil {
		return d.clock()
	}
	return monotonicNow()
}

func monotonicNow() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// SetDraining makes every hook send its flows inline, each under its
// guard; Steered says how many have not come yet. Stopping with flows
// still steered would let their next packets overtake the ones queued at
// the old targets.
func (d *Datapath) SetDraining(on bool) error {
	return d.setState(func(c *Config) { c.Draining, c.Unmarking = on, on && c.Unmarking })
}

// Pending is what stands between a drain and a detach that reorders
// nothing: the flows whose next stage is still steered away from the
// current CPU and that sent a packet within the guard timeout, and the
// segments of theirs that passed a hook and have neither reached the last
// stage nor been seen dropped (in flight, or lost where no tracepoint
// sees it).
type Pending struct {
	Flows    int
	InFlight uint64
	// Quiet steered flows (none of their packets seen by a hook nor
	// counted at the last stage for the guard timeout) whose segments are
	// not all accounted for: lost where no drop is counted, or queued on a
	// CPU stalled that long. Not waited for.
	IdleFlows    int
	IdleInFlight uint64
}

// Steered says what detaching now could reorder.
func (d *Datapath) Steered() (Pending, error) {
	return steered(d.maps.FalconFlowlets, d.maps.FalconHooks, d.maps.FalconDone, d.Config().GuardTimeout)
}

// ReadSteered is Steered for the datapath pinned in pinDir, a dead
// agent's included.
func ReadSteered(pinDir string) (Pending, error) {
	cfg, _, _, _, err := ReadState(pinDir)
	if err != nil {
		return Pending{}, err
	}
	var ms []*ebpf.Map
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	for _, name := range []string{"falcon_flowlets", "falcon_hooks", "falcon_done"} {
		m, err := openPinned(pinDir, name)
		if err != nil {
			return Pending{}, err
		}
		ms = append(ms, m)
	}
	return steered(ms[0], ms[1], ms[2], cfg.GuardTimeout)
}

func steered(flowlets, hooks, doneMap *ebpf.Map, guardTimeout time.Duration) (Pending, error) {
	now := monotonicNow()
	timeout := uint64(guardTimeout)
	var (
		k falconFlowletKey
		v falconFlowlet
		p Pending
	)
	slots := map[uint32]int{} // hook id: its done slot
	it := flowlets.Iterate()
	for it.Next(&k, &v) {
		// Signed: a packet may have stamped the entry after now was read.
		if v.Target == targetFallback {
			continue
		}
		slot, ok := slots[k.Hook]
		if !ok {
			var h falconHook
			if err := hooks.Lookup(k.Hook, &h); err != nil {
				return p, fmt.Errorf("read hook %d: %w", k.Hook, err)
			}
			slot = doneSlot(h)
			slots[k.Hook] = slot
		}
		var per []falconDone
		if doneMap.Lookup(&k.Flowhash, &per) != nil {
			per = nil
		}
		var done, last uint64
		for _, c := range per {
			done += c.C[slot]
			last = max(last, c.LastNs)
		}
		// Idle as the guard's last resort counts it (bpf/guard.h, lost):
		// nothing seen by the hook, nothing counted at the last stage.
		idle := int64(now-v.LastSeenNs) > int64(timeout) && int64(now-last) > int64(timeout)
		out := max(int64(v.Base+v.Sent-done), 0)
		switch {
		case !idle:
			p.Flows++
			p.InFlight += uint64(out)
		case out > 0:
			p.IdleFlows++
			p.IdleInFlight += uint64(out)
		}
	}
	return p, it.Err()
}

// doneSlot is the count a hook compares its sent with: bpf/guard.h's
// done_slot for the tc roles, and for the split hook DONE_SPLIT when its
// packets are marked (bpf/split.c), DONE_ALL otherwise.
func doneSlot(h falconHook) int {
	switch h.Role {
	case roleNIC:
		return 1
	case roleOverlay:
		return 2
	case roleSplit:
		if h.Marks != 0 {
			return 3
		}
	}
	return 0
}

// targetFallback is TARGET_FALLBACK (bpf/datapath.h): the next stage inline.
const targetFallback = 0xffffffff
