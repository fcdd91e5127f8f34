package discover

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"syscall"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"

	"github.com/falconnet/falcon/internal/netns"
)

// Directories where runtimes bind-mount network namespaces: iproute2 and CNI
// (/run/netns), Docker (/run/docker/netns). A namespace bind-mounted
// anywhere else (a Docker daemon with its own --exec-root keeps its network
// sandboxes, which no process lives in, under EXEC_ROOT/netns) is found
// through the mount table, and any other through /proc/PID/ns/net as long
// as a process lives in it.
var nsDirs = []string{netns.Dir, "/run/docker/netns", "/var/run/docker/netns"}

// candidate is a namespace falcon can open, under the best path it has.
type candidate struct {
	name string // as internal/netns takes it
	ino  uint64
}

// candidates lists every namespace reachable by path, one entry per
// namespace (by inode), preferring names under /run/netns, then other
// bind mounts, then /proc/PID/ns/net of the lowest PID. It grows lazily:
// bind mounts cover most runtimes (CNI, Docker), and a busy host has
// thousands of processes that need not be looked at then.
type candidates struct {
	list    []candidate
	seen    map[uint64]bool
	dirs    bool     // bind mounts listed
	pids    []int    // processes not looked at yet
	procs   bool     // /proc listed
	skipped []string // bind-mount entries that are no namespace, and why
}

// add adds namespace name if it is one. Every path is looked at, and later
// opened, through netns.Open, which opens nothing that is no namespace
// file: anyone who can write to /run/netns could otherwise leave a FIFO
// there that every discovery's open would wait on forever. Such an entry
// of a bind-mount directory (report) is skipped and said so; a process
// that is gone meanwhile is not worth a word.
func (cs *candidates) add(name string, report bool) {
	id, err := netns.Identify(name)
	if err != nil {
		if report && !errors.Is(err, os.ErrNotExist) {
			cs.skipped = append(cs.skipped, fmt.Sprintf("%s skipped: %v", netns.Path(name), err))
		}
		return
	}
	if cs.seen[id.Ino] {
		return
	}
	cs.seen[id.Ino] = true
	cs.list = append(cs.list, candidate{name: name, ino: id.Ino})
}

// mounted lists the bind-mounted candidates (and any process's namespace
// listed already).
func (cs *candidates) mounted() []candidate {
	cs.get(0)
	return slices.Clone(cs.list)
}

// get returns the i-th candidate, listing more as needed.
func (cs *candidates) get(i int) (candidate, bool) {
	if cs.seen == nil {
		cs.seen = map[uint64]bool{}
	}
	if !cs.dirs {
		cs.dirs = true
		for _, dir := range nsDirs {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if dir == netns.Dir {
					cs.add(e.Name(), true)
				} else {
					cs.add(filepath.Join(dir, e.Name()), true)
				}
			}
		}
		for _, p := range netns.Mounts() {
			cs.add(p, true)
		}
	}
	for i >= len(cs.list) {
		if !cs.procs {
			cs.procs = true
			procs, _ := os.ReadDir("/proc")
			for _, e := range procs {
				// Not our own: a thread of ours may sit in another
				// namespace for a moment (netns.Do), and /proc/self
				// follows the main thread.
				if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
					cs.pids = append(cs.pids, pid)
				}
			}
			sort.Ints(cs.pids)
		}
		if len(cs.pids) == 0 {
			return candidate{}, false
		}
		p := "/proc/" + strconv.Itoa(cs.pids[0]) + "/ns/net"
		cs.pids = cs.pids[1:]
		cs.add(p, false)
	}
	return cs.list[i], true
}

// view resolves the namespace ids (IFLA_LINK_NETNSID) that one namespace
// uses for others into paths.
type view struct {
	h     *netlink.Handle
	cands *candidates
	ids   map[int]candidate
	next  int // candidates before next are already in ids
}

func newView(h *netlink.Handle, cands *candidates) *view {
	return &view{h: h, cands: cands, ids: map[int]candidate{}}
}

// resolve returns the namespace that nsid stands for in this view. It asks
// the kernel for the id of one candidate after another, and stops as soon
// as it knows the answer, so that hosts with many processes pay only for
// the namespaces they need.
func (v *view) resolve(nsid int) (candidate, bool) {
	if c, ok := v.ids[nsid]; ok {
		return c, true
	}
	for {
		c, ok := v.cands.get(v.next)
		if !ok {
			return candidate{}, false
		}
		v.next++
		id, err := nsidOf(v.h, c.name)
		if err != nil || id < 0 {
			continue
		}
		if _, dup := v.ids[id]; !dup {
			v.ids[id] = c
		}
		if id == nsid {
			return c, true
		}
	}
}

// all resolves every candidate and returns those with an id in this view.
func (v *view) all() map[int]candidate {
	v.resolve(-2) // no namespace has id -2: walks all candidates
	return v.ids
}

func nsidOf(h *netlink.Handle, name string) (int, error) {
	f, err := netns.Open(name)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	return h.GetNetNsIdByFd(int(f.Fd()))
}

// openHandle returns a netlink handle in namespace name and its inode.
func openHandle(name string) (*netlink.Handle, uint64, error) {
	f, err := netns.Open(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil, 0, err
	}
	h, err := netlink.NewHandleAt(vns.NsHandle(f.Fd()))
	if err != nil {
		return nil, 0, err
	}
	return h, st.Ino, nil
}

// linkList retries dumps that the kernel interrupted because links changed
// meanwhile (containers come and go while we look).
func linkList(h *netlink.Handle) ([]netlink.Link, error) {
	var err error
	for i := 0; i < 5; i++ {
		var ls []netlink.Link
		ls, err = h.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return ls, err
		}
	}
	return nil, err
}
