package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/netns"
)

// kernelObjects is every falcon object in the kernel, by ID: the programs
// named falcon_*, the maps they use and the maps named falcon_*, and the
// links of those programs. IDs outlive every name and path, so they tell
// whether a disable freed everything, wherever it was attached.
type kernelObjects struct {
	progs    map[ebpf.ProgramID]string
	maps     map[ebpf.MapID]string
	links    map[link.ID]string // the program's name
	progMaps map[ebpf.ProgramID][]ebpf.MapID
	linkProg map[link.ID]ebpf.ProgramID
}

func listKernelObjects() (kernelObjects, error) {
	o := kernelObjects{progs: map[ebpf.ProgramID]string{}, maps: map[ebpf.MapID]string{}, links: map[link.ID]string{},
		progMaps: map[ebpf.ProgramID][]ebpf.MapID{}, linkProg: map[link.ID]ebpf.ProgramID{}}
	var pid ebpf.ProgramID
	for {
		var err error
		if pid, err = ebpf.ProgramGetNextID(pid); errors.Is(err, os.ErrNotExist) {
			break
		} else if err != nil {
			return o, fmt.Errorf("list programs: %w", err)
		}
		p, err := ebpf.NewProgramFromID(pid)
		if err != nil {
			continue // freed meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err != nil || !strings.HasPrefix(info.Name, "falcon_") {
			continue
		}
		o.progs[pid] = info.Name
		ids, _ := info.MapIDs()
		o.progMaps[pid] = ids
		for _, id := range ids {
			o.maps[id] = "(used by " + info.Name + ")"
		}
	}
	var mid ebpf.MapID
	for {
		var err error
		if mid, err = ebpf.MapGetNextID(mid); errors.Is(err, os.ErrNotExist) {
			break
		} else if err != nil {
			return o, fmt.Errorf("list maps: %w", err)
		}
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			continue
		}
		info, err := m.Info()
		m.Close()
		if err == nil && strings.HasPrefix(info.Name, "falcon_") {
			o.maps[mid] = info.Name
		}
	}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue
		}
		if name, ok := o.progs[info.Program]; ok {
			o.links[it.ID] = name
			o.linkProg[it.ID] = info.Program
		}
	}
	return o, it.Err()
}

// beyond lists what o has that base had not.
func (o kernelObjects) beyond(base kernelObjects) []string {
	var s []string
	for id, n := range o.progs {
		if _, ok := base.progs[id]; !ok {
			s = append(s, fmt.Sprintf("program %d %s", id, n))
		}
	}
	for id, n := range o.maps {
		if _, ok := base.maps[id]; !ok {
			s = append(s, fmt.Sprintf("map %d %s", id, n))
		}
	}
	for id, n := range o.links {
		if _, ok := base.links[id]; !ok {
			s = append(s, fmt.Sprintf("link %d of %s", id, n))
		}
	}
	slices.Sort(s)
	return s
}

// ownMaps is the IDs of the maps a test's agents pinned under its pin
// root: every falcon program those agents load uses some of them (the
// datapath pins all its maps). Other falcon agents on the machine, of
// other test processes or of users, pin theirs elsewhere.
type ownMaps map[ebpf.MapID]bool

// record adds the maps pinned under root now.
func (w ownMaps) record(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // gone meanwhile, or a directory to walk
		}
		m, err := ebpf.LoadPinnedMap(p, &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			return nil // a pinned link
		}
		defer m.Close()
		info, err := m.Info()
		if err != nil {
			return err
		}
		if id, ok := info.ID(); ok {
			w[id] = true
		}
		return nil
	})
}

// owned is what of o belongs to the agents whose maps are w: their maps,
// the programs that use one, those programs' other maps and their links.
func (o kernelObjects) owned(w ownMaps) kernelObjects {
	r := kernelObjects{progs: map[ebpf.ProgramID]string{}, maps: map[ebpf.MapID]string{}, links: map[link.ID]string{},
		progMaps: map[ebpf.ProgramID][]ebpf.MapID{}, linkProg: map[link.ID]ebpf.ProgramID{}}
	for id, n := range o.maps {
		if w[id] {
			r.maps[id] = n
		}
	}
	for pid, ids := range o.progMaps {
		if !slices.ContainsFunc(ids, func(id ebpf.MapID) bool { return w[id] }) {
			continue
		}
		r.progs[pid], r.progMaps[pid] = o.progs[pid], ids
		for _, id := range ids {
			r.maps[id] = o.maps[id]
		}
	}
	for id, pid := range o.linkProg {
		if _, ok := r.progs[pid]; ok {
			r.links[id], r.linkProg[id] = o.links[id], pid
		}
	}
	return r
}

// countLinks counts o's links of the program called name.
func (o kernelObjects) countLinks(name string) int {
	n := 0
	for _, p := range o.links {
		if p == name {
			n++
		}
	}
	return n
}

// kernelBack waits until the kernel holds no falcon object of own's beyond
// base and returns what is left after the deadline (nil: nothing). The
// kernel frees a program, and then its maps, after an RCU grace period and
// a work item, so a disable's objects take a moment to go; the deadline
// only guards against waiting forever.
func kernelBack(base kernelObjects, own ownMaps, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	for {
		o, err := listKernelObjects()
		if err != nil {
			return nil, err
		}
		left := o.owned(own).beyond(base)
		if len(left) == 0 || time.Now().After(deadline) {
			return left, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tcState lists, per namespace and device, the qdiscs and tc filters
// there, from netlink: what falcon attaches without tcx (clsact, cls_bpf)
// and must take away again.
func tcState(nss []string) (map[string]string, error) {
	out := map[string]string{}
	for _, ns := range nss {
		err := netns.Do(ns, func() error {
			links, err := netlink.LinkList()
			if err != nil {
				return err
			}
			for _, l := range links {
				var b strings.Builder
				qs, err := netlink.QdiscList(l)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				for _, q := range qs {
					fmt.Fprintf(&b, "qdisc %s %x; ", q.Type(), q.Attrs().Parent)
				}
				for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
					fs, err := netlink.FilterList(l, parent)
					if err != nil {
						continue // no clsact: no filters there
					}
					for _, f := range fs {
						name := ""
						if bf, ok := f.(*netlink.BpfFilter); ok {
							name = bf.Name
						}
						fmt.Fprintf(&b, "filter %s %x %s; ", f.Type(), parent, name)
					}
				}
				out[ns+":"+l.Attrs().Name] = b.String()
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("tc state of %s: %w", ns, err)
		}
	}
	return out, nil
}

// filesUnder lists the files and directories below root (root itself
// excluded; nil when root does not exist).
func filesUnder(root string) []string {
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != root {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// leftovers is what a disable left of falcon on a host and its containers,
// against the snapshots taken before falcon ran: BPF objects of the test's
// own agents (own, recorded while they run: the machine may run others),
// qdiscs and filters, RPS/RFS values, pins and state. Empty when nothing.
type leftovers struct {
	base  kernelObjects
	own   ownMaps
	tc    map[string]string
	rps   map[string]string
	nss   []string
	pins  string
	state string
}

func snapshotLeftovers(t *testing.T, nss []string, o Options) *leftovers {
	t.Helper()
	base, err := listKernelObjects()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tcState(nss)
	if err != nil {
		t.Fatal(err)
	}
	return &leftovers{base: base, own: ownMaps{}, tc: tc, rps: queueValues(t, nss), nss: nss, pins: o.pinRoot(), state: o.stateRoot()}
}

// record notes the maps of the test's agent running now, whose objects
// check then looks for; they must lead to its programs and links, or check
// would find nothing whatever the agent left.
func (l *leftovers) record(t *testing.T) {
	t.Helper()
	if err := l.own.record(l.pins); err != nil {
		t.Fatal(err)
	}
	o, err := listKernelObjects()
	if err != nil {
		t.Fatal(err)
	}
	if mine := o.owned(l.own); len(mine.progs) == 0 || len(mine.links) == 0 {
		t.Fatalf("the maps pinned under %s lead to %d programs and %d links: nothing to check", l.pins, len(mine.progs), len(mine.links))
	}
}

// check returns every leftover it finds now.
func (l *leftovers) check(t *testing.T) []string {
	t.Helper()
	if len(l.own) == 0 {
		t.Fatal("no map of the test's agents recorded: no kernel object to look for")
	}
	left, err := kernelBack(l.base, l.own, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tcState(l.nss)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tc {
		if l.tc[k] != v {
			left = append(left, fmt.Sprintf("tc on %s: %q, was %q", k, v, l.tc[k]))
		}
	}
	rps := queueValues(t, l.nss)
	for k, v := range rps {
		if l.rps[k] != v {
			left = append(left, fmt.Sprintf("%s = %q, was %q", k, v, l.rps[k]))
		}
	}
	for _, p := range filesUnder(l.pins) {
		left = append(left, "pin "+p)
	}
	for _, p := range filesUnder(l.state) {
		left = append(left, "state "+p)
	}
	return left
}
