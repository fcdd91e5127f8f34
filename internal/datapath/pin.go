package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// BPFFS is where bpffs is conventionally mounted (systemd does it at boot).
const BPFFS = "/sys/fs/bpf"

const pinPrefix = "falcon_"

func (d *Datapath) mapsByName() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"falcon_config":   d.maps.FalconConfig,
		"falcon_load":     d.maps.FalconLoad,
		"falcon_hooks":    d.maps.FalconHooks,
		"falcon_counters": d.maps.FalconCounters,
		"falcon_steered":  d.maps.FalconSteered,
		"falcon_flowlets": d.maps.FalconFlowlets,
		"falcon_debug":    d.maps.FalconDebug,
		"falcon_done":     d.maps.FalconDone,
		"falcon_stages":   d.maps.FalconStages,
	}
}

func isBPFFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.BPF_FS_MAGIC
}

func under(dir, root string) bool {
	return dir == root || strings.HasPrefix(dir, root+"/")
}

// existingAncestor is the deepest existing directory on the way to dir.
func existingAncestor(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil || dir == "/" {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}

// checkPinDir validates dir without changing anything.
func checkPinDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("pin directory %q is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	if pins, _ := filepath.Glob(filepath.Join(dir, pinPrefix+"*")); len(pins) > 0 {
		return fmt.Errorf("falcon's maps are already pinned in %s: another falcon datapath is loaded there, or one was killed (falcon disable removes it)", dir)
	}
	if isBPFFS(existingAncestor(dir)) || (under(dir, BPFFS) && !isBPFFS(BPFFS)) {
		return nil
	}
	return fmt.Errorf("pin directory %s is not on a bpf filesystem (mount -t bpf bpf %s)", dir, BPFFS)
}

// ensureBPFFS mounts bpffs at /sys/fs/bpf if dir needs it there and nothing
// is mounted; like systemd's mount it stays, as other BPF users expect it.
func ensureBPFFS(dir string) error {
	if isBPFFS(existingAncestor(dir)) {
		return nil
	}
	if !under(dir, BPFFS) || isBPFFS(BPFFS) {
		return fmt.Errorf("pin directory %s is not on a bpf filesystem", dir)
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs at %s: %w", BPFFS, err)
	}
	return nil
}

func (d *Datapath) pin() error {
	if err := ensureBPFFS(d.pinDir); err != nil {
		return err
	}
	if err := os.MkdirAll(d.pinDir, 0o700); err != nil {
		return fmt.Errorf("create pin directory: %w", err)
	}
	for name, m := range d.mapsByName() {
		p := filepath.Join(d.pinDir, name)
		if err := m.Pin(p); err != nil {
			return fmt.Errorf("pin %s: %w", name, err)
		}
		d.pinned = append(d.pinned, p)
	}
	return nil
}

func (d *Datapath) unpin() error {
	var errs []error
	for _, p := range d.pinned {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	d.pinned = nil
	if d.pinDir != "" {
		removeIfEmpty(d.pinDir)
	}
	return errors.Join(errs...)
}

func removeIfEmpty(dir string) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) == 0 {
		os.Remove(dir)
	}
}

// Cleanup removes what a killed agent left: the pins in pinDir, our cls_bpf
// filters (and then-empty clsact qdiscs) on the hooks, and any tcx link of
// ours still attached there. Hooks whose device is gone are skipped.
func Cleanup(pinDir string, hooks []Hook) error {
	var errs []error
	if pinDir != "" {
		pins, _ := filepath.Glob(filepath.Join(pinDir, pinPrefix+"*"))
		for _, p := range pins {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		removeIfEmpty(pinDir)
	}
	for _, h := range hooks {
		if !netns.Exists(h.Netns) {
			continue
		}
		clean := cleanupHook
		if h.Role == HookSplit {
			clean = cleanupSplit
		}
		err := netns.Do(h.Netns, func() error { return clean(h) })
		if err != nil {
			errs = append(errs, fmt.Errorf("clean up %s: %w", h, err))
		}
	}
	return errors.Join(errs...)
}

// hookLink returns h's device, or nil when there is nothing of falcon's
// left to clean up on it: the device is gone, or its ifindex belongs to
// another device now.
func hookLink(h Hook) (netlink.Link, error) {
	l, err := netlink.LinkByIndex(h.Ifindex)
	if err != nil {
		if gone(err) {
			return nil, nil
		}
		return nil, err
	}
	if h.Name != "" && l.Attrs().Name != h.Name {
		return nil, nil
	}
	return l, nil
}

func cleanupHook(h Hook) error {
	l, err := hookLink(h)
	if l == nil {
		return err
	}
	var errs []error
	removed := false
	for _, parent := range []uint32{filterParent(h.Egress)} {
		fs, err := netlink.FilterList(l, parent)
		if err != nil {
			if !gone(err) {
				errs = append(errs, err)
			}
			continue
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, progName) {
				if err := netlink.FilterDel(bf); err != nil && !gone(err) {
					errs = append(errs, err)
				}
				removed = true
			}
		}
	}
	if removed {
		errs = append(errs, deleteClsactIfEmpty(h.Ifindex))
	}
	errs = append(errs, detachTCXLinks(h))
	return errors.Join(errs...)
}

// detachTCXLinks detaches tcx links running our program: normally they die
// with the process that held them, but a hung agent still holds them.
func detachTCXLinks(h Hook) error {
	at := ebpf.AttachTCXIngress
	if h.Egress {
		at = ebpf.AttachTCXEgress
	}
	res, err := link.QueryPrograms(link.QueryOptions{Target: h.Ifindex, Attach: at})
	if err != nil {
		return nil // no tcx on this kernel: nothing can be attached there
	}
	var errs []error
	for _, ap := range res.Programs {
		lid, ok := ap.LinkID()
		if !ok {
			continue
		}
		p, err := ebpf.NewProgramFromID(ap.ID)
		if err != nil {
			continue
		}
		info, err := p.Info()
		p.Close()
		if err != nil || info.Name != progName {
			continue
		}
		l, err := link.NewFromID(lid)
		if err != nil {
			continue
		}
		if err := l.Detach(); err != nil {
			errs = append(errs, err)
		}
		l.Close()
	}
	return errors.Join(errs...)
}
