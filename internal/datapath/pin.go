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
		"falcon_config":     d.maps.FalconConfig,
		"falcon_load":       d.maps.FalconLoad,
		"falcon_hooks":      d.maps.FalconHooks,
		"falcon_counters":   d.maps.FalconCounters,
		"falcon_steered":    d.maps.FalconSteered,
		"falcon_flowlets":   d.maps.FalconFlowlets,
		"falcon_debug":      d.maps.FalconDebug,
		"falcon_done":       d.maps.FalconDone,
		"falcon_stages":     d.maps.FalconStages,
		"falcon_mflow":      d.maps.FalconMflow,
		"falcon_split_devs": d.maps.FalconSplitDevs,
		"falcon_gro":        d.maps.FalconGro,
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

// pinLink pins l in the pin directory, so that its program stays attached
// when the agent is killed: the load the program reads then goes stale, and
// every stage runs inline as without falcon (docs/architecture.md#control-plane) until
// disable or the next agent removes the pin (Cleanup). Without a pin
// directory the link lives as long as its file descriptor.
func (d *Datapath) pinLink(l link.Link) error {
	if d.pinDir == "" {
		return nil
	}
	p := filepath.Join(d.pinDir, fmt.Sprintf("%slink_%d", pinPrefix, d.links.Add(1)))
	if err := l.Pin(p); err != nil {
		return fmt.Errorf("pin link: %w", err)
	}
	return nil
}

// closeLink removes l's pin, if any, and closes it, which detaches its
// program.
func closeLink(l link.Link) error {
	return errors.Join(l.Unpin(), l.Close())
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
	// The hooks first: a link's detach is synchronous, the release that
	// follows removing its last pin may be deferred to a kernel worker.
	for _, h := range hooks {
		if !netns.Exists(h.Netns) {
			continue
		}
		clean := cleanupHook
		switch h.Role {
		case HookSplit:
			clean = cleanupSplit
		case HookFastNIC, HookFastVeth, HookFastPod:
			clean = cleanupFast
		}
		err := netns.Do(h.Netns, func() error { return clean(h) })
		if err != nil {
			errs = append(errs, fmt.Errorf("clean up %s: %w", h, err))
		}
	}
	if pinDir != "" {
		pins, _ := filepath.Glob(filepath.Join(pinDir, pinPrefix+"*"))
		for _, p := range pins {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		removeIfEmpty(pinDir)
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
	if l, err := hookLink(h); l == nil {
		return err
	}
	return errors.Join(deleteFilters(h, progName, filterParent(h.Egress)), detachTCXLinks(h, nil))
}

// deleteFilters removes the cls_bpf filters named with prefix at h's
// device under parents, and the clsact qdisc if that leaves it empty; a
// device gone (or reused) is nothing to clean.
func deleteFilters(h Hook, prefix string, parents ...uint32) error {
	l, err := hookLink(h)
	if l == nil {
		return err
	}
	var errs []error
	removed := false
	for _, parent := range parents {
		fs, err := netlink.FilterList(l, parent)
		if err != nil {
			if !gone(err) {
				errs = append(errs, err)
			}
			continue
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, prefix) {
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
	return errors.Join(errs...)
}

// detachTCXLinks detaches falcon's tcx links at h, except the one running
// keep (nil: all of them): a dead agent's links live on in their pins, and
// a hung agent still holds its own.
func detachTCXLinks(h Hook, keep *ebpf.Program) error {
	var keepID ebpf.ProgramID
	if keep != nil {
		info, err := keep.Info()
		if err != nil {
			return err
		}
		keepID, _ = info.ID()
	}
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
		if !ok || (keep != nil && ap.ID == keepID) {
			continue
		}
		p, err := ebpf.NewProgramFromID(ap.ID)
		if err != nil {
			continue
		}
		info, err := p.Info()
		p.Close()
		if err != nil || !strings.HasPrefix(info.Name, pinPrefix) {
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
