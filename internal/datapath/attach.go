package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/netns"
)

// Role says what a hook sees and which stage it steers.
type HookRole string

const (
	// HookOnNIC: the underlay NIC; packets are VXLAN-encapsulated, the program
	// parses the inner packet and steers the VXLAN device's stage.
	HookOnNIC HookRole = "nic"
	// HookOnOverlay: a device that sees decapsulated packets (the VXLAN
	// device, or the host-side veth at egress); steers the container's stage.
	HookOnOverlay HookRole = "overlay"
	// HookArrival: a container's end, where the ordering guard counts what
	// the last stage received (AttachArrival); it steers nothing.
	HookArrival HookRole = "arrival"
)

func (r HookRole) bpf() (uint32, error) {
	switch r {
	case HookOnNIC:
		return roleNIC, nil
	case HookOnOverlay:
		return roleOverlay, nil
	case HookSplit:
		return roleSplit, nil
	case HookArrival:
		return roleArrival, nil
	}
	return 0, fmt.Errorf("role %q: want %q or %q", r, HookOnNIC, HookOnOverlay)
}

// Hook is one attachment point.
type Hook struct {
	Netns       string // network namespace name or path; "" = current
	Ifindex     int
	Name        string // device name, checked against Ifindex when set
	Role        HookRole
	NextIfindex int  // salt of the choice: the device whose stage this hook steers
	Egress      bool // attach at egress instead of ingress (e.g. host-side veth)
	// HostNIC: a NIC of the host network itself, no overlay (FALCON's
	// Host+): its packets come unencapsulated and the host's own sockets
	// receive them, so its split parses them as they are and its arrival
	// counter takes the split's mark from the frame's metadata.
	HostNIC bool `json:",omitempty"`
}

func (h Hook) String() string {
	dir := "ingress"
	if h.Egress {
		dir = "egress"
	}
	ns := h.Netns
	if ns == "" {
		ns = "current netns"
	}
	name := h.Name
	if name == "" {
		name = "device"
	}
	return fmt.Sprintf("%s (ifindex %d, %s) %s", name, h.Ifindex, ns, dir)
}

type hookKey struct {
	netns   string
	ifindex int
	egress  bool
}

func (h Hook) key() hookKey { return hookKey{netns.Path(h.Netns), h.Ifindex, h.Egress} }

// SameAttachPoint reports whether h and o attach to the same device and
// direction, where one program replaces the other.
func (h Hook) SameAttachPoint(o Hook) bool { return h.key() == o.key() }

type attachment struct {
	hook   Hook
	id     uint32
	prog   *ebpf.Program
	link   link.Link          // tcx
	filter *netlink.BpfFilter // clsact + cls_bpf
	ns     netns.Stamp        // the namespace the filter went into
	qdisc  bool               // we created the clsact qdisc
	shared bool               // prog is not this attachment's (the arrival counter)
}

// progName is the program's name in the kernel and the cls_bpf filter's
// name; Cleanup recognises our attachments by it.
const progName = "falcon_steer"

// filterPrio: cls_bpf filters run in priority order; ours only sets the hash
// and passes on, so it goes first.
const filterPrio = 1

func (h Hook) validate() error {
	if _, err := h.Role.bpf(); err != nil {
		return err
	}
	if h.Ifindex <= 0 {
		return fmt.Errorf("hook %s: ifindex must be positive", h)
	}
	if h.NextIfindex < 0 {
		return fmt.Errorf("hook %s: next ifindex %d is negative", h, h.NextIfindex)
	}
	return netns.Check(h.Netns)
}

// Attach attaches the program at h, with tcx where the kernel has it (6.6+)
// and clsact + cls_bpf (direct action) otherwise. Attaching the same device
// and direction again updates its role and salt.
func (d *Datapath) Attach(h Hook) error {
	if err := h.validate(); err != nil {
		return err
	}
	switch h.Role {
	case HookSplit:
		return fmt.Errorf("hook %s: the split role is XDP: use AttachSplit", h)
	case HookArrival:
		return fmt.Errorf("hook %s: the arrival counter is the guard's: use AttachArrival", h)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if a, ok := d.hooks[h.key()]; ok {
		a.hook = h
		return d.writeHook(a.id, h, true)
	}
	id, err := d.allocID()
	if err != nil {
		return err
	}
	a := &attachment{hook: h, id: id}
	if err := d.attach(a); err != nil {
		d.ids[id] = false
		return err
	}
	d.hooks[h.key()] = a
	return nil
}

func (d *Datapath) allocID() (uint32, error) {
	for i := range d.ids {
		if !d.ids[i] {
			d.ids[i] = true
			return uint32(i), nil
		}
	}
	return 0, fmt.Errorf("all %d hook slots in use", MaxHooks)
}

func (d *Datapath) attach(a *attachment) error {
	return d.attachWith(a, "hook", d.program, func(netlink.Link) error { return d.attachTC(a) })
}

// attachTC links a's program with tcx where the kernel has it (6.6+) and
// with clsact + cls_bpf otherwise (in a's namespace).
func (d *Datapath) attachTC(a *attachment) error {
	if !d.forceClsact {
		err := d.attachTCX(a)
		if !errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
	}
	return d.attachClsact(a)
}

// hookDevice is h's device, checked to be still the one named (in h's
// namespace); kind names the hook in errors.
func hookDevice(h Hook, kind string) (netlink.Link, error) {
	l, err := netlink.LinkByIndex(h.Ifindex)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, h, err)
	}
	if h.Name != "" && l.Attrs().Name != h.Name {
		return nil, fmt.Errorf("%s %s: ifindex %d is %s now", kind, h, h.Ifindex, l.Attrs().Name)
	}
	return l, nil
}

// attachWith loads a's program with load, runs fn in the hook's namespace
// with its device, checked to be still the one named, and then fills a's
// hook slot: the program passes everything untouched until then, and the
// slot's attach time (which the ordering guard relies on) comes after the
// attach, not before a program load that can take longer than the guard
// timeout. kind names the hook in errors. On failure the slot is marked
// inactive and the program closed.
func (d *Datapath) attachWith(a *attachment, kind string, load func(id uint32) (*ebpf.Program, error), fn func(netlink.Link) error) (err error) {
	if err := d.resetSlot(a.id); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			d.writeHook(a.id, a.hook, false)
			if a.prog != nil {
				a.prog.Close()
			}
		}
	}()
	if a.prog, err = load(a.id); err != nil {
		return err
	}
	return netns.Do(a.hook.Netns, func() error {
		l, err := hookDevice(a.hook, kind)
		if err != nil {
			return err
		}
		if err := fn(l); err != nil {
			return err
		}
		return d.writeHook(a.id, a.hook, true)
	})
}

// program loads an instance that knows its hook slot, or takes the one a
// detached hook left in it; the maps are shared (d.mu held).
func (d *Datapath) program(id uint32) (*ebpf.Program, error) {
	if p := d.spare[id]; p != nil {
		delete(d.spare, id)
		return p, nil
	}
	spec := d.spec.Copy()
	if err := spec.Variables["hook_id"].Set(id); err != nil {
		return nil, err
	}
	if d.debug {
		if err := spec.Variables["debug_on"].Set(uint32(1)); err != nil {
			return nil, err
		}
	}
	var objs struct {
		Prog *ebpf.Program `ebpf:"falcon_steer"`
	}
	err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: d.mapsByName()})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load BPF program: %+v", ve)
		}
		return nil, fmt.Errorf("load BPF program: %w", err)
	}
	return objs.Prog, nil
}

func (a *attachment) tcxType() ebpf.AttachType {
	if a.hook.Egress {
		return ebpf.AttachTCXEgress
	}
	return ebpf.AttachTCXIngress
}

func (d *Datapath) attachTCX(a *attachment) error {
	l, err := link.AttachTCX(link.TCXOptions{
		Interface: a.hook.Ifindex,
		Program:   a.prog,
		Attach:    a.tcxType(),
		Anchor:    link.Head(),
	})
	if err != nil {
		return fmt.Errorf("hook %s: attach tcx: %w", a.hook, err)
	}
	if err := d.pinLink(l); err != nil {
		l.Close()
		return fmt.Errorf("hook %s: %w", a.hook, err)
	}
	a.link = l
	// Ours runs first from here on: a dead agent's program behind it
	// (pinned, running on stale load) can go.
	if err := detachTCXLinks(a.hook, a.prog); err != nil {
		return fmt.Errorf("hook %s: detach a dead agent's program: %w", a.hook, err)
	}
	return nil
}

// Detach removes the program from h; a hook that is not attached is no error.
func (d *Datapath) Detach(h Hook) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.detachLocked(d.hooks, h)
}

// detachLocked removes h's attachment from set (d.mu held).
func (d *Datapath) detachLocked(set map[hookKey]*attachment, h Hook) error {
	a, ok := set[h.key()]
	if !ok {
		return nil
	}
	delete(set, h.key())
	var errs []error
	if a.link != nil {
		errs = append(errs, closeLink(a.link))
	}
	if a.filter != nil {
		errs = append(errs, netns.DoIfSame(a.hook.Netns, a.ns, func() error { return detachClsact(a) }))
	}
	if !a.shared {
		errs = append(errs, d.writeHook(a.id, a.hook, false))
		if old := d.spare[a.id]; old != nil {
			old.Close()
		}
		d.spare[a.id] = a.prog
		d.ids[a.id] = false
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach %s: %w", a.hook, err)
	}
	return nil
}

func (d *Datapath) writeHook(id uint32, h Hook, active bool) error {
	role, err := h.Role.bpf()
	if err != nil {
		return err
	}
	// The inode identifies the namespace for display in another process;
	// 0 (unknown) is harmless there.
	ino, _ := netns.Inode(h.Netns)
	b := falconHook{
		Ifindex:     uint32(h.Ifindex),
		NextIfindex: uint32(h.NextIfindex),
		Role:        role,
		NetnsIno:    ino,
		AttachedNs:  d.attachClock(),
	}
	if active {
		b.Active = 1
	}
	if h.Egress {
		b.Egress = 1
	}
	if h.HostNIC {
		b.HostNic = 1
	}
	// The split program marks its packets only where a tc program is
	// there to carry the mark to the last stage, the NIC's hook, or to
	// count it, a host NIC's arrival counter (attached first: the agent
	// attaches hooks and arrival counters before splits); without, its
	// flows count against every arrival.
	if h.Role == HookSplit {
		k := hookKey{netns.Path(h.Netns), h.Ifindex, false}
		nic, hooked := d.hooks[k]
		at, counted := d.arrivals[k]
		if (hooked && nic.hook.Role == HookOnNIC) || (counted && h.HostNIC && at.hook.HostNIC) {
			b.Marks = 1
		}
	}
	putCString(b.Name[:], h.Name)
	putCString(b.Netns[:], h.Netns)
	if err := d.maps.FalconHooks.Put(id, &b); err != nil {
		return fmt.Errorf("write BPF hook %d: %w", id, err)
	}
	return nil
}

// resetSlot clears the counters a previous hook left in slot id.
func (d *Datapath) resetSlot(id uint32) error {
	zero := make([]falconCounters, ebpf.MustPossibleCPU())
	if err := d.maps.FalconCounters.Put(id, zero); err != nil {
		return fmt.Errorf("reset BPF counters: %w", err)
	}
	var k falconSteerKey
	var v []uint64
	var stale []falconSteerKey
	it := d.maps.FalconSteered.Iterate()
	for it.Next(&k, &v) {
		if k.Hook == id {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := d.maps.FalconSteered.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return it.Err()
}

func putCString(dst []int8, s string) {
	for i := 0; i < len(dst)-1 && i < len(s); i++ {
		dst[i] = int8(s[i])
	}
}

func cString(src []int8) string {
	b := make([]byte, 0, len(src))
	for _, c := range src {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
