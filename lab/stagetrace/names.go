package stagetrace

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/falconnet/falcon/internal/netns"
)

// netnsInode is netns.Inode in the width of the BPF side, where the
// kernel's net->ns.inum is an unsigned int.
func netnsInode(name string) (uint32, error) {
	ino, err := netns.Inode(name)
	return uint32(ino), err
}

var initNetnsInode = sync.OnceValue(func() uint32 {
	ino, _ := netnsInode("/proc/1/ns/net")
	return ino
})

// resolver maps namespace inodes to names and (inode, ifindex) to device
// names. Namespaces without a name in /run/netns are named by the path
// they are bind-mounted at (Docker's sandboxes), or found through a
// process living in them (a container's).
type resolver struct {
	names map[uint32]string // inode -> /run/netns name
	paths map[uint32]string // inode -> a path that opens it
	devs  map[uint32]map[int]string
	procs bool // /proc scanned
}

func newResolver() *resolver {
	r := &resolver{names: map[uint32]string{}, paths: map[uint32]string{},
		devs: map[uint32]map[int]string{}}
	ents, _ := os.ReadDir(netns.Dir)
	for _, e := range ents {
		if ino, err := netnsInode(e.Name()); err == nil {
			r.names[ino] = e.Name()
			r.paths[ino] = netns.Path(e.Name())
		}
	}
	// Namespaces bind-mounted elsewhere (a Docker daemon's sandboxes) by
	// their path.
	for _, p := range netns.Mounts() {
		if ino, err := netnsInode(p); err == nil {
			if _, ok := r.names[ino]; !ok {
				r.names[ino], r.paths[ino] = p, p
			}
		}
	}
	if ino := initNetnsInode(); ino != 0 {
		if _, ok := r.paths[ino]; !ok {
			r.paths[ino] = "/proc/1/ns/net"
		}
	}
	return r
}

func (r *resolver) path(ino uint32) string {
	if p, ok := r.paths[ino]; ok || r.procs {
		return p
	}
	r.procs = true
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		p := filepath.Join("/proc", e.Name(), "ns/net")
		if i, err := netnsInode(p); err == nil {
			if _, ok := r.paths[i]; !ok {
				r.paths[i] = p
			}
		}
	}
	return r.paths[ino]
}

func (r *resolver) dev(ino uint32, ifindex int) string {
	m, ok := r.devs[ino]
	if !ok {
		m = map[int]string{}
		r.devs[ino] = m
		if p := r.path(ino); p != "" {
			_ = netns.Do(p, func() error {
				ifs, err := net.Interfaces()
				for _, i := range ifs {
					m[i.Index] = i.Name
				}
				return err
			})
		}
	}
	return m[ifindex]
}

// devIndex finds the ifindex of device dev in namespace ns.
func devIndex(ns, dev string) (int, error) {
	var idx int
	err := netns.Do(ns, func() error {
		i, err := net.InterfaceByName(dev)
		if err != nil {
			where := fmt.Sprintf("network namespace %q", ns)
			if ns == "" {
				where = "the current network namespace"
			}
			return fmt.Errorf("no device %q in %s", dev, where)
		}
		idx = i.Index
		return nil
	})
	return idx, err
}
