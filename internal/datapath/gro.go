package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// The split program marks frames through XDP metadata, and GRO keeps frames
// whose metadata differs in separate entries that can leave out of order:
// one flow's marked and unmarked frames must never meet in a NIC's GRO
// (bpf/split.c gro_gate). The program changes between the two on a CPU only
// once the NIC's NAPI poll there has let go of every frame it took before;
// the guard's napi_poll program stamps that time, which needs to know, per
// split NIC, how long GRO may hold a frame past the poll's return.

// groHoldBusy is how long GRO may still hold a frame after a poll that ran
// out of budget: kernels with HZ >= 1000 then flush only frames from an
// earlier jiffy, others everything (net/core/dev.c, __napi_poll). The tick
// is the resolution of the coarse clock.
func groHoldBusy() uint64 {
	var ts unix.Timespec
	if unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &ts) != nil {
		return uint64(10 * time.Millisecond) // the longest tick (HZ 100): late, never early
	}
	if tick := ts.Nano(); tick <= int64(time.Millisecond) {
		return uint64(tick)
	}
	return 0
}

// groHoldDone is how long GRO may hold a frame after a poll that finished:
// the device's gro_flush_timeout (0 by default: napi_complete_done flushes).
func groHoldDone(ns, dev string) (uint64, error) {
	var v uint64
	err := netns.WithSysfs(ns, func(root string) error {
		b, err := os.ReadFile(filepath.Join(root, "class/net", dev, "gro_flush_timeout"))
		if errors.Is(err, os.ErrNotExist) {
			return nil // kernels before 4.1 had none
		}
		if err != nil {
			return err
		}
		v, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read gro_flush_timeout of %s: %w", dev, err)
	}
	return v, nil
}

// registerSplitNIC tells the guard's poll program which hook splits h's
// device and starts the hook unmarked: frames polled before the attach
// carry nothing (d.mu held; before the XDP attach).
func (d *Datapath) registerSplitNIC(id uint32, h Hook, holdDone uint64) error {
	ino, err := netns.Inode(h.Netns)
	if err != nil {
		return err
	}
	k := falconStageDev{NetnsIno: uint32(ino), Ifindex: uint32(h.Ifindex)}
	v := falconSplitDev{Hook: id, HoldDoneNs: holdDone, HoldBusyNs: groHoldBusy()}
	if err := d.maps.FalconSplitDevs.Put(&k, &v); err != nil {
		return fmt.Errorf("register split NIC %s: %w", h, err)
	}
	if err := d.maps.FalconGro.Put(id, falconGroState{}); err != nil {
		return fmt.Errorf("reset GRO state of split NIC %s: %w", h, err)
	}
	return nil
}

// unregisterSplitNIC undoes registerSplitNIC (d.mu held; after the detach).
func (d *Datapath) unregisterSplitNIC(h Hook) error {
	ino, err := netns.Inode(h.Netns)
	if err != nil {
		return nil // the namespace is gone, and its devices with it
	}
	k := falconStageDev{NetnsIno: uint32(ino), Ifindex: uint32(h.Ifindex)}
	if err := d.maps.FalconSplitDevs.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unregister split NIC %s: %w", h, err)
	}
	return nil
}

// SetUnmarking asks the split programs to stop marking, CPU by CPU as GRO
// allows, so that detaching them changes no frame's metadata; a drain comes
// first. SetDraining(false) ends it too.
func (d *Datapath) SetUnmarking(on bool) error {
	return d.setState(func(c *Config) { c.Unmarking = on })
}

// Unmarked says whether a split program could be detached now without
// its frames' metadata changing under GRO: it marks nothing, or GRO has
// let go of every frame it marked (which, while unmarking, also means it
// marks no more). True without splits.
func (d *Datapath) Unmarked() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.splits {
		var g falconGroState
		if err := d.maps.FalconGro.Lookup(a.id, &g); err != nil {
			return false, fmt.Errorf("read GRO state of %s: %w", a.hook, err)
		}
		if g.Meta != 0 && int64(g.FlushedNs-g.LastNs) <= 0 {
			return false, nil
		}
	}
	return true, nil
}
