package datapath

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Splitting the NIC stage (bpf/split.c): native XDP on the NIC redirects
// overlay frames into a cpumap, whose kthread on the chosen CPU builds the
// skb (and from 6.15 runs GRO), so the interrupt CPU keeps only the driver
// poll. The choice is the tc program's own (bpf/choose.h) over the split
// set, salted with the NIC's ifindex.

// HookSplit is the XDP program on a NIC (see AttachSplit).
const HookSplit HookRole = "split"

// Inner protocols --split-proto takes.
const (
	SplitAll = "all"
	SplitTCP = "tcp"
	SplitUDP = "udp"
)

// CPUMapQueue is the size of each split CPU's cpumap queue, in frames.
// The queue must hold what arrives while the CPU's kthread is not running:
// after a wake-up from a deep C-state (about 133 µs on the Xeons the kernel's
// samples/bpf/xdp_redirect_cpu measured) a 10 Gbit/s port delivers up to
// 14.88 Mpps × 133 µs ≈ 1979 minimum-size frames, hence 2048, the default
// of that sample and of xdp-tools' xdp-bench. Larger queues only add
// latency and pin memory (a frame holds its page until its skb is built:
// 2048 × 4 KiB = 8 MiB per CPU at worst); full queues show as enqueue drops
// in falcon status.
const CPUMapQueue = 2048

const (
	splitProgName = "falcon_split"
	splitStatsPin = "falcon_split_stats"
)

// SplitHook is a NIC whose stage is split.
type SplitHook struct {
	Netns   string // network namespace name or path; "" = current
	Ifindex int
	Name    string // device name, checked against Ifindex when set
	HostNIC bool   // a NIC of the host network itself (Hook.HostNIC)
}

// Hook is the split hook as the hooks map and Cleanup know it: role split,
// salted with the NIC's own ifindex.
func (s SplitHook) Hook() Hook {
	return Hook{Netns: s.Netns, Ifindex: s.Ifindex, Name: s.Name, Role: HookSplit, NextIfindex: s.Ifindex, HostNIC: s.HostNIC}
}

func splitProto(p string) (uint32, error) {
	switch p {
	case "", SplitAll:
		return 0, nil
	case SplitTCP:
		return 6, nil
	case SplitUDP:
		return 17, nil
	}
	return 0, fmt.Errorf("split protocol %q: want %s, %s or %s", p, SplitTCP, SplitUDP, SplitAll)
}

func protoName(n uint32) string {
	switch n {
	case 6:
		return SplitTCP
	case 17:
		return SplitUDP
	}
	return SplitAll
}

// SplitSet is the split CPU set in ascending order: SplitCPUs, or the Falcon
// set when none are given.
func (c Config) SplitSet() []int {
	if len(c.SplitCPUs) > 0 {
		s := slices.Clone(c.SplitCPUs)
		slices.Sort(s)
		return s
	}
	return c.SortedCPUs()
}

// AttachSplit attaches the split program to a NIC in native XDP mode. It
// checks first, changing nothing, that the driver has native XDP with
// redirect and that no other XDP program is there; generic (skb) XDP is
// refused, as it runs after skb allocation and splits nothing. The first
// split hook creates the cpumap (entries only for the split set) and the
// tracepoints that count its traffic; the last one's detach removes them.
// Attaching an attached NIC again is no error.
func (d *Datapath) AttachSplit(s SplitHook) error {
	h := s.Hook()
	if err := h.validate(); err != nil {
		return err
	}
	if err := checkPossible(d.Config().SplitSet()); err != nil {
		return err
	}
	if _, err := CheckSplit(s.Netns, s.Ifindex, s.Name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.splits[h.key()]; ok {
		return nil
	}
	if err := d.openSplit(); err != nil {
		return err
	}
	id, err := d.allocID()
	if err == nil {
		a := &attachment{hook: h, id: id}
		if err = d.attachXDP(a); err == nil {
			d.splits[h.key()] = a
			return nil
		}
		d.ids[id] = false
	}
	if len(d.splits) == 0 {
		// Bad input changes nothing: not even a parked cpumap stays.
		d.closeSplitState()
	}
	return err
}

// openSplit creates the cpumap, its counters and tracepoints, or starts
// them again where the last split hook's detach parked them (d.mu held).
func (d *Datapath) openSplit() (err error) {
	if d.split != nil {
		if !d.split.parked {
			return nil
		}
		if err := d.split.start(d.Config().SplitSet(), d.pinDir); err != nil {
			return errors.Join(err, d.split.park())
		}
		return nil
	}
	spec, err := loadSplit()
	if err != nil {
		return err
	}
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	s := &cpumapState{spec: spec, entries: map[int]bool{}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	newMap := func(name string) (*ebpf.Map, error) {
		// In the spec itself: the programs loaded from it must agree.
		spec.Maps[name].MaxEntries = uint32(n)
		m, err := ebpf.NewMap(spec.Maps[name])
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		return m, nil
	}
	if s.cpumap, err = newMap("falcon_cpumap"); err != nil {
		return err
	}
	if s.stats, err = newMap("falcon_split_stats"); err != nil {
		return err
	}
	info, err := s.cpumap.Info()
	if err != nil {
		return err
	}
	id, ok := info.ID()
	if !ok {
		return errors.New("the kernel did not report the cpumap's id")
	}
	if err := spec.Variables["cpumap_id"].Set(uint32(id)); err != nil {
		return err
	}
	if err := spec.Variables["cpumap_qsize"].Set(uint32(CPUMapQueue)); err != nil {
		return err
	}
	var objs struct {
		Enqueue *ebpf.Program `ebpf:"falcon_cpumap_enqueue"`
		Kthread *ebpf.Program `ebpf:"falcon_cpumap_kthread"`
	}
	err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"falcon_split_stats": s.stats,
	}})
	if err != nil {
		return fmt.Errorf("load cpumap tracepoint programs: %w", err)
	}
	s.progs = []*ebpf.Program{objs.Enqueue, objs.Kthread}
	if err := s.start(d.Config().SplitSet(), d.pinDir); err != nil {
		return err
	}
	d.split = s
	return nil
}

// activeSplit is the cpumap state while a split hook is attached (d.mu
// held).
func (d *Datapath) activeSplit() *cpumapState {
	if d.split == nil || d.split.parked {
		return nil
	}
	return d.split
}

func (d *Datapath) splitProgram(id uint32) (*ebpf.Program, error) {
	if p := d.splitSpare[id]; p != nil {
		delete(d.splitSpare, id)
		return p, nil
	}
	spec := d.split.spec.Copy()
	if err := spec.Variables["hook_id"].Set(id); err != nil {
		return nil, err
	}
	if d.debug {
		if err := spec.Variables["debug_on"].Set(uint32(1)); err != nil {
			return nil, err
		}
	}
	repl := d.mapsByName()
	repl["falcon_cpumap"] = d.split.cpumap
	repl["falcon_split_stats"] = d.split.stats
	var objs struct {
		Prog *ebpf.Program `ebpf:"falcon_split"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load BPF split program: %+v", ve)
		}
		return nil, fmt.Errorf("load BPF split program: %w", err)
	}
	return objs.Prog, nil
}

func (d *Datapath) attachXDP(a *attachment) error {
	return d.attachWith(a, "split", d.splitProgram, func(l netlink.Link) error {
		name := l.Attrs().Name
		hold, err := groHoldDone(a.hook.Netns, name)
		if err != nil {
			return err
		}
		if err := d.registerSplitNIC(a.id, a.hook, hold); err != nil {
			return err
		}
		a.link, err = link.AttachXDP(link.XDPOptions{Program: a.prog, Interface: a.hook.Ifindex, Flags: link.XDPDriverMode})
		switch {
		case err == nil:
			if err := d.pinLink(a.link); err != nil {
				a.link.Close()
				a.link = nil
				return fmt.Errorf("split %s: %w", name, err)
			}
			return nil
		case errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("NIC %s has no native XDP: --split needs it, and falcon does not fall back to generic XDP, which runs after skb allocation and splits nothing (%w)", name, err)
		case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST):
			// A dead agent's split program, still running on its pinned
			// link: ours takes its place in one step.
			if old := ourXDPLink(l); old != nil {
				if err := old.Update(a.prog); err != nil {
					old.Close()
					return fmt.Errorf("NIC %s: replace a dead agent's split program: %w", name, err)
				}
				if err := d.pinLink(old); err != nil {
					old.Close()
					return fmt.Errorf("split %s: %w", name, err)
				}
				a.link = old
				return nil
			}
			return fmt.Errorf("NIC %s already runs another XDP program; a device takes one (%w)", name, err)
		}
		return fmt.Errorf("attach XDP to %s in native mode: %w", name, err)
	})
}

// DetachSplit removes the split program from a NIC; the last one removes
// the cpumap (its kthreads stop) and the tracepoints. A NIC not split is no
// error.
func (d *Datapath) DetachSplit(s SplitHook) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.detachSplit(s.Hook().key())
}

func (d *Datapath) detachSplit(k hookKey) error {
	a, ok := d.splits[k]
	if !ok {
		return nil
	}
	delete(d.splits, k)
	var errs []error
	if a.link != nil {
		errs = append(errs, closeLink(a.link))
	}
	errs = append(errs, d.writeHook(a.id, a.hook, false), d.unregisterSplitNIC(a.hook))
	if old := d.splitSpare[a.id]; old != nil {
		old.Close()
	}
	d.splitSpare[a.id] = a.prog // for the next attach in that slot (a comeback)
	d.ids[a.id] = false
	if len(d.splits) == 0 && d.split != nil {
		errs = append(errs, d.split.park())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach split %s: %w", a.hook, err)
	}
	return nil
}

func (d *Datapath) closeSplits() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for k := range d.splits {
		errs = append(errs, d.detachSplit(k))
	}
	return errors.Join(append(errs, d.closeSplitState())...)
}

// closeSplitState closes the cpumap state and the kept split programs,
// which hold its maps (d.mu held, no split attached).
func (d *Datapath) closeSplitState() error {
	var errs []error
	for id, p := range d.splitSpare {
		errs = append(errs, p.Close())
		delete(d.splitSpare, id)
	}
	if d.split != nil {
		errs = append(errs, d.split.close())
		d.split = nil
	}
	return errors.Join(errs...)
}

// Splits lists the attached split hooks.
func (d *Datapath) Splits() []SplitHook {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []SplitHook
	for _, a := range d.splits {
		out = append(out, SplitHook{Netns: a.hook.Netns, Ifindex: a.hook.Ifindex, Name: a.hook.Name})
	}
	return out
}

// XDPProgramID is the id of the split program attached to s, for tests and
// status; 0 when s is not split.
func (d *Datapath) XDPProgramID(s SplitHook) ebpf.ProgramID {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.splits[s.Hook().key()]
	if !ok {
		return 0
	}
	info, err := a.prog.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return id
}

// CPUMapID is the id of the cpumap while a split hook is attached, else 0.
func (d *Datapath) CPUMapID() ebpf.MapID {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.activeSplit() == nil {
		return 0
	}
	info, err := d.split.cpumap.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return id
}

// cleanupSplit detaches falcon's XDP link from h's device, left by an agent
// that hangs (links die with the process that holds them).
func cleanupSplit(h Hook) error {
	l, err := hookLink(h)
	if l == nil {
		return err
	}
	old := ourXDPLink(l)
	if old == nil {
		return nil
	}
	defer old.Close()
	return old.Detach()
}

// ourXDPLink is the link that runs falcon's split program on l, nil if
// another program or none runs there. The caller closes it.
func ourXDPLink(l netlink.Link) link.Link {
	x := l.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 || !isOurs(x.ProgId) {
		return nil
	}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil || info.Type != link.XDPType || uint32(info.Program) != x.ProgId {
			continue
		}
		if xi := info.XDP(); xi != nil && int(xi.Ifindex) != l.Attrs().Index {
			continue
		}
		return it.Take()
	}
	return nil
}
