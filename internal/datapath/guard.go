package datapath

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// The receiving half of the ordering guard (bpf/guard.c): programs on
// net:netif_receive_skb and skb:kfree_skb that count, per flow, the
// segments arriving at each registered stage device. A hook moves a flow
// only when they match what it sent (bpf/choose.h).

type guardState struct {
	progs []*ebpf.Program
	links []link.Link
}

func (g *guardState) close() error {
	var errs []error
	for _, l := range g.links {
		errs = append(errs, l.Close())
	}
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
		Receive *ebpf.Program `ebpf:"falcon_guard_receive"`
		Drop    *ebpf.Program `ebpf:"falcon_guard_drop"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: d.mapsByName()}); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load BPF guard programs: %+v", ve)
		}
		return fmt.Errorf("load BPF guard programs: %w", err)
	}
	g := &guardState{progs: []*ebpf.Program{objs.Receive, objs.Drop}}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	for _, p := range g.progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach guard program %s: %w", p, err)
		}
		g.links = append(g.links, l)
	}
	d.guard = g
	return nil
}

// StageDev is a device whose receive is a stage some hook steers: the
// VXLAN devices (steered by the NIC's hook, HookOnNIC), the containers' ends
// (steered by the VXLAN device's hook, HookOnOverlay) and the split NICs
// (HookSplit). NetnsIno identifies the device's namespace.
type StageDev struct {
	NetnsIno  uint32
	Ifindex   int
	SteeredBy HookRole
}

// AddStage registers a stage device with the guard. A hook's flows can move
// safely only when every device they reach next is registered: elsewhere
// their packets are never counted, and the guard waits for the timeout.
func (d *Datapath) AddStage(s StageDev) error {
	r, err := s.SteeredBy.bpf()
	if err != nil {
		return err
	}
	k := falconStageDev{NetnsIno: s.NetnsIno, Ifindex: uint32(s.Ifindex)}
	if err := d.maps.FalconStages.Put(&k, r); err != nil {
		return fmt.Errorf("register stage device %d in netns %d: %w", s.Ifindex, s.NetnsIno, err)
	}
	return nil
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
	cfg := d.Config()
	if cfg.Engaged == on {
		return nil
	}
	cfg.Engaged = on
	return d.SetConfig(cfg)
}

var possible = sync.OnceValue(func() int {
	n, err := ebpf.PossibleCPU()
	if err != nil || n < 1 || n > MaxCPUs {
		return MaxCPUs
	}
	return n
})

func possibleCPUs() int { return possible() }
