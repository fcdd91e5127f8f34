package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

func clsactQdisc(ifindex int) *netlink.GenericQdisc {
	return &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: ifindex,
			Handle:    netlink.MakeHandle(0xffff, 0),
			Parent:    netlink.HANDLE_CLSACT,
		},
		QdiscType: "clsact",
	}
}

func filterParent(egress bool) uint32 {
	if egress {
		return netlink.HANDLE_MIN_EGRESS
	}
	return netlink.HANDLE_MIN_INGRESS
}

// attachClsact runs inside the hook's namespace, which it stamps for the
// detach (see detachLocked).
func (d *Datapath) attachClsact(a *attachment) error {
	var err error
	if a.ns, err = netns.StampOf(""); err != nil {
		return fmt.Errorf("hook %s: identify its namespace: %w", a.hook, err)
	}
	err = netlink.QdiscAdd(clsactQdisc(a.hook.Ifindex))
	switch {
	case err == nil:
		a.qdisc = true
	case errors.Is(err, unix.EEXIST):
	default:
		return fmt.Errorf("hook %s: add clsact qdisc: %w", a.hook, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: a.hook.Ifindex,
			Parent:    filterParent(a.hook.Egress),
			Handle:    1,
			Priority:  filterPrio,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           a.prog.FD(),
		Name:         progName,
		DirectAction: true,
	}
	add := netlink.FilterAdd
	if old := ourFilter(a.hook); old != nil {
		// A dead agent's filter (still running, on stale load) holds our
		// handle: swapped in one step, no packet passes unhooked. Its
		// clsact qdisc was falcon's, so ours to remove when empty.
		add, a.qdisc = netlink.FilterReplace, true
	}
	if err := add(f); err != nil {
		if a.qdisc {
			netlink.QdiscDel(clsactQdisc(a.hook.Ifindex))
			a.qdisc = false
		}
		return fmt.Errorf("hook %s: add cls_bpf filter: %w", a.hook, err)
	}
	a.filter = f
	return nil
}

// ourFilter is the cls_bpf filter of falcon's at h's handle and priority,
// nil if there is none (or another's is there: adding ours then fails).
func ourFilter(h Hook) *netlink.BpfFilter {
	l, err := netlink.LinkByIndex(h.Ifindex)
	if err != nil {
		return nil
	}
	fs, err := netlink.FilterList(l, filterParent(h.Egress))
	if err != nil {
		return nil
	}
	for _, f := range fs {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Priority == filterPrio && bf.Handle == 1 && strings.HasPrefix(bf.Name, progName) {
			return bf
		}
	}
	return nil
}

func detachClsact(a *attachment) error {
	err := netlink.FilterDel(a.filter)
	if gone(err) {
		return nil // the device went away, and our filter with it
	}
	if err != nil {
		return err
	}
	if a.qdisc {
		return deleteClsactIfEmpty(a.hook.Ifindex)
	}
	return nil
}

// gone reports errors meaning the device (and so everything on it) vanished.
func gone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.As(err, &nf)
}

func deleteClsactIfEmpty(ifindex int) error {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		if gone(err) {
			return nil
		}
		return err
	}
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := netlink.FilterList(l, parent)
		if err != nil && !gone(err) {
			return err
		}
		if len(fs) > 0 {
			return nil // someone else's filters still need it
		}
	}
	err = netlink.QdiscDel(clsactQdisc(ifindex))
	if gone(err) || errors.Is(err, unix.EINVAL) {
		return nil
	}
	return err
}
