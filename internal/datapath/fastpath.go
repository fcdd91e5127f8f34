package datapath

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// The fast path's hook roles: where its programs attach (bpf/fastpath.c).
const (
	// HookFastNIC: the underlay NIC, ingress (decapsulate and deliver) and
	// egress (learn what the VXLAN device built).
	HookFastNIC HookRole = "fastpath-nic"
	// HookFastVeth: a container's host-side veth, ingress (encapsulate and
	// send) and egress (learn what the slow path delivered).
	HookFastVeth HookRole = "fastpath-veth"
	// HookFastPod: a container's end, ingress, past the veth's backlog:
	// where a packet on the slow path has arrived for the ordering guard.
	HookFastPod HookRole = "fastpath-pod"
)

// fastPrefix names the fast path's programs and cls_bpf filters, so that
// Cleanup finds them and falcon's own cleanup leaves them alone.
const fastPrefix = "fpath_"

// The fast path's filter on kernels without tcx: after falcon's (priority
// 1), which passes every packet on.
const fastFilterPrio, fastFilterHandle = 250, 250

// FastCounters names the slots of enum fp_counter (bpf/fastpath.h).
var FastCounters = []string{
	"ingress_hit", "ingress_miss", "egress_hit", "egress_miss",
	"ingress_learned", "egress_learned", "send_moved", "guard_wait", "stale",
	"spoofed", "changed_by_slow_path", "tcp_control", "not_eligible",
	"helper_failed", "conntrack_wait", "idle", "over_share_pending", "over_share_entry",
	"csum_aggregate",
}

// FastSlowReasons are the counters of packets left to the slow path, by
// reason: every FastCounters name from guard_wait on.
func FastSlowReasons() []string { return FastCounters[slices.Index(FastCounters, "guard_wait"):] }

// FastPathSupported says whether this kernel can run the fast path: tc
// programs and bpf_redirect_peer (Linux 5.10) for tc.
func FastPathSupported() error {
	if err := Supported(); err != nil {
		return err
	}
	err := features.HaveProgramHelper(ebpf.SchedCLS, asm.FnRedirectPeer)
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("this kernel lacks the BPF helper bpf_redirect_peer (Linux 5.10), which the fast path needs to deliver into a container")
	}
	return err
}

// FastPath is the loaded fast path: its maps, its four programs and where
// they are attached.
type FastPath struct {
	mu    sync.Mutex
	objs  fastpathObjects
	cfg   fastpathFpConfig
	hooks map[hookKey][]fastAttachment
	poll  link.Link // the guard's count of arrivals at napi_poll's return
	// forceClsact makes attach skip tcx (tests of the pre-6.6 path).
	forceClsact bool
}

type fastAttachment struct {
	link   link.Link
	filter *netlink.BpfFilter
	ns     netns.Stamp // the namespace a filter went into
}

// NewFastPath loads the fast path for VXLAN devices on ports; it starts
// with empty caches, off until Renew.
func NewFastPath(ports []int) (*FastPath, error) {
	if len(ports) == 0 || len(ports) > MaxPorts {
		return nil, fmt.Errorf("fast path: %d VXLAN ports, want 1 to %d", len(ports), MaxPorts)
	}
	f := &FastPath{hooks: map[hookKey][]fastAttachment{}}
	err := loadFastpathObjects(&f.objs, nil)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load the fast path: %+v", ve)
		}
		return nil, fmt.Errorf("load the fast path: %w", err)
	}
	if f.poll, err = link.AttachTracing(link.TracingOptions{Program: f.objs.FpathPoll}); err != nil {
		f.objs.Close()
		return nil, fmt.Errorf("fast path: attach to the napi_poll tracepoint: %w", err)
	}
	f.cfg.Gen = 1
	f.cfg.On = 1
	f.cfg.ShareVeth, f.cfg.ShareRemote = fastShares(f.objs.FpIn.MaxEntries())
	for i, p := range ports {
		f.cfg.Ports[i] = uint16(p)
	}
	f.cfg.Nports = uint32(len(ports))
	return f, nil
}

// Renew keeps the fast path on for d more: the programs stop using their
// caches when the agent stops renewing (a killed agent invalidates nothing).
func (f *FastPath) Renew(d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.AliveUntilNs = monotonicNow() + uint64(d)
	return f.objs.FpConf.Put(uint32(0), f.cfg)
}

// SetOn turns the programs' use of their caches on or off; off, every
// packet takes the slow path (and nothing is learned).
func (f *FastPath) SetOn(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.On = 0
	if on {
		f.cfg.On = 1
	}
	return f.objs.FpConf.Put(uint32(0), f.cfg)
}

// SetSenderOrder tells the programs the RPS map the agent sets on the
// containers' host-side veths (cpus, as sysfs lists a mask's online CPUs:
// ascending), so that each flow a container sends waits on its home CPU's
// backlog (bpf/fastpath_order.h); none: the programs leave the hash alone.
func (f *FastPath) SetSenderOrder(cpus []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cfg := f.cfg
	cfg.SendN, cfg.SendPos = 0, [len(cfg.SendPos)]uint16{}
	cs := slices.Clone(cpus)
	slices.Sort(cs)
	for i, c := range slices.Compact(cs) {
		if c < 0 || c >= len(cfg.SendPos) {
			return fmt.Errorf("fast path: sender order: CPU %d out of range 0-%d", c, len(cfg.SendPos)-1)
		}
		cfg.SendPos[c] = uint16(i + 1)
		cfg.SendN++
	}
	if err := f.objs.FpConf.Put(uint32(0), cfg); err != nil {
		return err
	}
	f.cfg = cfg
	return nil
}

// Invalidate makes every cached entry unusable at once: the next packet of
// every flow takes the slow path, which teaches the caches again.
func (f *FastPath) Invalidate() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.Gen++
	if f.cfg.Gen == 0 { // 0 marks a flow whose slow packets span generations
		f.cfg.Gen = 1
	}
	return f.objs.FpConf.Put(uint32(0), f.cfg)
}

// Generation is the current cache generation.
func (f *FastPath) Generation() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg.Gen
}

// Attach attaches the fast path's programs at h, in h's namespace: at a
// NIC or host-side veth ingress and egress, at a container's end ingress.
func (f *FastPath) Attach(h Hook) error {
	var in, eg *ebpf.Program
	switch h.Role {
	case HookFastNIC:
		in, eg = f.objs.FpathNicIn, f.objs.FpathNicEg
	case HookFastVeth:
		in, eg = f.objs.FpathVethIn, f.objs.FpathVethEg
	case HookFastPod:
		in, eg = f.objs.FpathPodIn, f.objs.FpathPodEg
	default:
		return fmt.Errorf("hook %s: role %q is not the fast path's", h, h.Role)
	}
	if h.Ifindex <= 0 {
		return fmt.Errorf("hook %s: ifindex must be positive", h)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.hooks[h.key()]; ok {
		return nil
	}
	var atts []fastAttachment
	err := netns.Do(h.Netns, func() error {
		if _, err := hookDevice(h, "fast path"); err != nil {
			return err
		}
		for _, dir := range []struct {
			prog   *ebpf.Program
			egress bool
		}{{eg, true}, {in, false}} { // learn before using
			if dir.prog == nil {
				continue
			}
			a, err := f.attachOne(h.Ifindex, dir.prog, dir.egress)
			if err != nil {
				return fmt.Errorf("hook %s: %w", h, err)
			}
			atts = append(atts, a)
		}
		return nil
	})
	if err != nil {
		detachFastIn(h.Netns, h.Ifindex, atts)
		return err
	}
	f.hooks[h.key()] = atts
	return nil
}

func (f *FastPath) attachOne(ifindex int, prog *ebpf.Program, egress bool) (fastAttachment, error) {
	if !f.forceClsact {
		at := ebpf.AttachTCXIngress
		if egress {
			at = ebpf.AttachTCXEgress
		}
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: at, Anchor: link.Tail()})
		if err == nil {
			return fastAttachment{link: l}, nil
		}
		if !errors.Is(err, ebpf.ErrNotSupported) {
			return fastAttachment{}, fmt.Errorf("attach tcx: %w", err)
		}
	}
	if err := netlink.QdiscAdd(clsactQdisc(ifindex)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fastAttachment{}, fmt.Errorf("add clsact qdisc: %w", err)
	}
	info, _ := prog.Info()
	name := fastPrefix
	if info != nil {
		name = info.Name
	}
	fl := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: ifindex, Parent: filterParent(egress),
			Handle: fastFilterHandle, Priority: fastFilterPrio, Protocol: unix.ETH_P_ALL,
		},
		Fd: prog.FD(), Name: name, DirectAction: true,
	}
	if err := netlink.FilterReplace(fl); err != nil {
		deleteClsactIfEmpty(ifindex)
		return fastAttachment{}, fmt.Errorf("add cls_bpf filter: %w", err)
	}
	stamp, err := netns.StampOf("") // attachOne runs inside the hook's namespace
	if err != nil {
		netlink.FilterDel(fl)
		deleteClsactIfEmpty(ifindex)
		return fastAttachment{}, fmt.Errorf("identify the filter's namespace: %w", err)
	}
	return fastAttachment{filter: fl, ns: stamp}, nil
}

// detachFastIn detaches atts from device ifindex of namespace ns: a tcx
// link from anywhere, filters from inside the namespace they went into,
// while ns still names it (see netns.DoIfSame).
func detachFastIn(ns string, ifindex int, atts []fastAttachment) error {
	var errs []error
	var filters []*netlink.BpfFilter
	var stamp netns.Stamp
	for _, a := range atts {
		switch {
		case a.link != nil:
			errs = append(errs, a.link.Close())
		case a.filter != nil:
			filters, stamp = append(filters, a.filter), a.ns
		}
	}
	if len(filters) == 0 {
		return errors.Join(errs...)
	}
	errs = append(errs, netns.DoIfSame(ns, stamp, func() error {
		var errs []error
		for _, fl := range filters {
			if err := netlink.FilterDel(fl); err != nil && !gone(err) {
				errs = append(errs, err)
			}
		}
		return errors.Join(append(errs, deleteClsactIfEmpty(ifindex))...)
	}))
	return errors.Join(errs...)
}

// Detach removes the programs from h; not attached is no error.
func (f *FastPath) Detach(h Hook) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	atts, ok := f.hooks[h.key()]
	if !ok {
		return nil
	}
	delete(f.hooks, h.key())
	return detachFastIn(h.Netns, h.Ifindex, atts)
}

// Close detaches everything and releases the programs and maps.
func (f *FastPath) Close() error {
	f.mu.Lock()
	hooks := f.hooks
	f.hooks = map[hookKey][]fastAttachment{}
	f.mu.Unlock()
	var errs []error
	for k, atts := range hooks {
		errs = append(errs, detachFastIn(k.netns, k.ifindex, atts))
	}
	if f.poll != nil {
		errs = append(errs, f.poll.Close())
	}
	errs = append(errs, f.objs.Close())
	return errors.Join(errs...)
}

// cleanupFast removes what a killed agent's fast path left at h: cls_bpf
// filters (tcx links die with the agent's file descriptors).
func cleanupFast(h Hook) error {
	return deleteFilters(h, fastPrefix, netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS)
}
