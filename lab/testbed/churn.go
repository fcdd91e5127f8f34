package testbed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Containers come and go on a running testbed as they do on a node: a
// runtime makes a namespace and a veth pair, wires the host end as the
// layout does, and later removes them. AddContainer and RemoveContainer do
// that with real namespaces and veths, so that an agent following the
// overlay sees what it would see on a node (the churn drill).

// maxSlot bounds the address slots of a host: docker's share of its /24
// has dockerSlots; calico's /25 block and flannel's /24 have more.
const maxSlot = dockerSlots - 1

// AddContainer makes one more container on host hi (0: h1, 1: h2) of
// testbed name, wired as Up wires the layout's containers, and records it
// in the state file. Its name is fresh (c<n>, n above every container the
// host ever had, as runtimes never reuse a namespace's name), its address
// the first one of the host's range that no container holds. On the docker
// layout the other host's VXLAN device learns its address and MAC, as
// Docker's overlay driver writes them.
func AddContainer(ctx context.Context, name string, hi int) (Container, error) {
	t, err := Get(name)
	if err != nil {
		return Container{}, err
	}
	if hi < 0 || hi > 1 {
		return Container{}, fmt.Errorf("testbed %s: no host %d (0 is h1, 1 is h2)", name, hi)
	}
	if runtimeContainers(t.Layout) {
		return Container{}, fmt.Errorf("testbed %s: layout %s makes its containers through its runtime; adding one is not built (use flannel-daemon for churn with real CNI plugins)", name, t.Layout)
	}
	li := layoutInfos[t.Layout]
	if li.vethPrefix == "" {
		return Container{}, fmt.Errorf("testbed %s: layout %s has no containers", name, t.Layout)
	}
	h := &t.Hosts[hi]
	next := h.NextContainer
	used := map[string]bool{}
	for _, c := range h.Containers {
		if n, err := strconv.Atoi(strings.TrimPrefix(c.Name, "c")); err == nil {
			next = max(next, n+1)
		}
		used[c.Addr] = true
	}
	slot := 0
	for ; slot <= maxSlot && used[t.containerAddr(hi, slot)]; slot++ {
	}
	if slot > maxSlot {
		return Container{}, fmt.Errorf("testbed %s: no address left on %s (%d containers)", name, h.Name, len(h.Containers))
	}
	c := Container{
		Name:     fmt.Sprintf("c%d", next),
		Netns:    containerNS(name, h.Name, next),
		Dev:      "eth0",
		Addr:     t.containerAddr(hi, slot),
		HostVeth: li.vethPrefix + digest(name, h.Name, next)[:li.vethHex],
	}
	b := &builder{ctx: ctx, t: t}
	if out, err := exec.Command("ip", "netns", "add", c.Netns).CombinedOutput(); err != nil {
		return Container{}, fmt.Errorf("ip netns add %s: %v: %s", c.Netns, err, strings.TrimSpace(string(out)))
	}
	err = b.initNS(c.Netns)
	if err == nil {
		err = b.wireContainer(hi, &c)
	}
	if err == nil && t.Layout == "docker" {
		err = b.dockerLearn(1-hi, c)
	}
	if err == nil {
		h.Containers = append(h.Containers, c)
		h.NextContainer = next + 1
		err = writeState(t)
	}
	if err != nil {
		b.unwireContainer(hi, c)
		removeNS(c.Netns)
		return Container{}, fmt.Errorf("testbed %s: add container: %w", name, err)
	}
	return c, nil
}

// wireContainer makes c's veth pair and wires both ends as the layout does;
// on flannel-daemon the CNI plugins do, and c gets their address and veth.
// What the other host learns of c (docker: dockerLearn) is apart.
func (b *builder) wireContainer(hi int, cp *Container) error {
	h, c, ips := b.t.Hosts[hi], *cp, b.t.ips()
	switch b.t.Layout {
	case "flannel-daemon":
		bin, err := DaemonsDir()
		if err != nil {
			return err
		}
		return b.cniAdd(bin, hi, cp)
	case "docker":
		if err := b.container(h, c, ips.subnet, dockerMAC(c.Addr), ""); err != nil {
			return err
		}
		return b.ip(h.Netns, fmt.Sprintf("link set %s master %s up", c.HostVeth, h.Bridge))
	case "flannel":
		if err := b.container(h, c, ips.subnet, "", ips.flannel(hi, 1)); err != nil {
			return err
		}
		return b.ip(h.Netns, fmt.Sprintf("link set %s master %s up", c.HostVeth, h.Bridge))
	case "calico":
		if err := b.container(h, c, ips.one, "", ips.calicoGW); err != nil {
			return err
		}
		if !ips.v6 {
			if err := b.sysctl(h.Netns, "net.ipv4.conf."+c.HostVeth+".proxy_arp", "1"); err != nil {
				return err
			}
			// Without this the proxy ARP reply waits up to 0.8 s.
			if err := b.sysctl(h.Netns, "net.ipv4.neigh."+c.HostVeth+".proxy_delay", "0"); err != nil {
				return err
			}
		}
		return b.ip(h.Netns,
			fmt.Sprintf("link set %s address ee:ee:ee:ee:ee:ee up", c.HostVeth),
			fmt.Sprintf("route add %s/%d dev %s scope link", c.Addr, ips.one, c.HostVeth))
	}
	return fmt.Errorf("layout %s has no containers", b.t.Layout)
}

// unwireContainer removes c's host end and what the other host knows of
// it; what is not there is no error.
func (b *builder) unwireContainer(hi int, c Container) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	if b.t.Layout == "flannel-daemon" {
		// The plugins delete the pair and release the address (CNI DEL).
		bin, err := DaemonsDir()
		if err == nil {
			err = cniDel(bin, podPath(b.t.Name, h.Name, c.Name))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	// The runtime deletes the host end first: the pair goes at once, not
	// when the kernel gets round to destroying the namespace.
	var errs []string
	if err := b.ip(h.Netns, "link del "+c.HostVeth); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err.Error())
	}
	switch b.t.Layout {
	case "flannel":
		// The bridge, the containers' gateway, would keep sending to the
		// old MAC until its entry went stale; the CNI bridge plugin's
		// gratuitous ARP for a new container does the same as this.
		b.ip(h.Netns, fmt.Sprintf("neigh del %s dev %s", c.Addr, h.Bridge))
	case "docker":
		mac := dockerMAC(c.Addr)
		b.ip(p.Netns, fmt.Sprintf("neigh del %s dev %s", c.Addr, p.Overlay))
		b.fdb(p.Netns, fmt.Sprintf("fdb del %s dev %s self", mac, p.Overlay))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// RemoveContainer removes container cname (c0, c12 ...) of host hi of
// testbed name: its host end, the other host's entries for it, its
// namespace (killing what runs inside) and its record in the state file.
func RemoveContainer(name string, hi int, cname string) error {
	t, err := Get(name)
	if err != nil {
		return err
	}
	if hi < 0 || hi > 1 {
		return fmt.Errorf("testbed %s: no host %d (0 is h1, 1 is h2)", name, hi)
	}
	h := &t.Hosts[hi]
	i := slices.IndexFunc(h.Containers, func(c Container) bool { return c.Name == cname })
	if i < 0 {
		return fmt.Errorf("testbed %s: %s has no container %s", name, h.Name, cname)
	}
	c := h.Containers[i]
	b := &builder{ctx: context.Background(), t: t}
	err = b.unwireContainer(hi, c)
	if rerr := removeNS(c.Netns); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("testbed %s: remove container %s: %w", name, cname, err)
	}
	h.Containers = slices.Delete(h.Containers, i, i+1)
	// Keep the removed one's name taken.
	if n, err := strconv.Atoi(strings.TrimPrefix(c.Name, "c")); err == nil {
		h.NextContainer = max(h.NextContainer, n+1)
	}
	return writeState(t)
}
