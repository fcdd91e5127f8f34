package discover

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// ErrNoOverlay is wrapped by Discover's error when a namespace has no VXLAN
// device (and none elsewhere uses it as underlay).
var ErrNoOverlay = errors.New("no VXLAN overlay found")

const nicWarning = "cannot tell the NIC under "

// nsInfo is one namespace as seen over netlink.
type nsInfo struct {
	name  string
	ino   uint64
	h     *netlink.Handle
	links []netlink.Link
	view  *view
}

func (n *nsInfo) link(idx int) netlink.Link {
	for _, l := range n.links {
		if l.Attrs().Index == idx {
			return l
		}
	}
	return nil
}

type discoverer struct {
	cands *candidates
	open  map[uint64]*nsInfo
	o     *Overlay
	seen  map[string]bool
}

func (d *discoverer) openNS(name string) (*nsInfo, error) {
	h, ino, err := openHandle(name)
	if err != nil {
		return nil, fmt.Errorf("network namespace %q: %w", name, err)
	}
	if n, ok := d.open[ino]; ok {
		h.Close()
		return n, nil
	}
	links, err := linkList(h)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("list links of network namespace %q: %w", name, err)
	}
	n := &nsInfo{name: name, ino: ino, h: h, links: links, view: newView(h, d.cands)}
	d.open[ino] = n
	return n, nil
}

func (d *discoverer) close() {
	for _, n := range d.open {
		n.h.Close()
	}
}

func (d *discoverer) warnf(format string, a ...any) {
	d.o.Warnings = append(d.o.Warnings, fmt.Sprintf(format, a...))
}

func (d *discoverer) add(n *nsInfo, l netlink.Link, role Role) Device {
	a := l.Attrs()
	dev := Device{
		Name: a.Name, Ifindex: a.Index, Netns: n.name, Role: role, Kind: l.Type(),
		MTU: a.MTU, RxQueues: a.NumRxQueues, Up: a.Flags&net.FlagUp != 0,
	}
	if a.MasterIndex != 0 {
		if m := n.link(a.MasterIndex); m != nil {
			dev.Master = m.Attrs().Name
		}
	}
	if !d.seen[dev.Key()] {
		d.seen[dev.Key()] = true
		d.o.Devices = append(d.o.Devices, dev)
	}
	return dev
}

// Discover finds the overlay whose underlay is network namespace hostNS
// ("" = the current one): the VXLAN devices there, or, as Docker does it,
// in other namespaces with their UDP socket in hostNS; their NIC; bridges
// with a VXLAN port; the veths on them (or, as Calico does it, routed veths
// next to an unbridged VXLAN device); and the containers' ends.
func Discover(hostNS string) (*Overlay, error) {
	if err := netns.Check(hostNS); err != nil {
		return nil, err
	}
	d := &discoverer{cands: &candidates{}, open: map[uint64]*nsInfo{},
		o: &Overlay{Netns: hostNS}, seen: map[string]bool{}}
	defer d.close()
	host, err := d.openNS(hostNS)
	if err != nil {
		return nil, err
	}
	overlayNS := []*nsInfo{}
	if hasVXLAN(host) {
		overlayNS = append(overlayNS, host)
	}
	// Docker creates vxlan0 in the host and moves it into a sandbox
	// namespace; its socket, and so its underlay, stay in the host. The
	// sandboxes are bind-mounted (no process lives in them), so those are
	// always looked at, also beside a VXLAN device of the host's own (a
	// swarm node running Flannel too); every other namespace only when
	// neither has one, since that means listing every process's.
	sandboxes := d.cands.mounted()
	if len(overlayNS) == 0 {
		sandboxes = slices.Collect(maps.Values(host.view.all()))
	}
	for _, c := range sandboxes {
		if c.ino == host.ino {
			continue
		}
		n, err := d.openNS(c.name)
		if err != nil || !hasVXLAN(n) {
			continue
		}
		overlayNS = append(overlayNS, n)
	}
	for _, n := range overlayNS {
		if err := d.overlay(host, n); err != nil {
			return nil, err
		}
	}
	d.o.Warnings = append(d.o.Warnings, d.cands.skipped...)
	if len(d.o.Role(RoleOverlay)) == 0 {
		where := "network namespace " + hostNS
		if hostNS == "" {
			where = "the current network namespace"
		}
		return nil, fmt.Errorf("%w in %s: no VXLAN device uses it as underlay (see 'ip -d link show type vxlan')", ErrNoOverlay, where)
	}
	return d.o, nil
}

func hasVXLAN(n *nsInfo) bool {
	for _, l := range n.links {
		if _, ok := l.(*netlink.Vxlan); ok {
			return true
		}
	}
	return false
}

// overlay adds the VXLAN devices of namespace n whose underlay is host, and
// everything hanging off them.
func (d *discoverer) overlay(host, n *nsInfo) error {
	var bridges []netlink.Link
	var routed []netlink.Link
	for _, l := range n.links {
		vx, ok := l.(*netlink.Vxlan)
		if !ok {
			continue
		}
		if n != host {
			c, ok := n.view.resolve(vx.NetNsID)
			if vx.NetNsID < 0 || !ok || c.ino != host.ino {
				continue
			}
		}
		info := &VXLAN{VNI: vx.VxlanId, Port: vx.Port, FlowBased: vx.FlowBased}
		if vx.SrcAddr != nil {
			info.Local = vx.SrcAddr.String()
		}
		if vx.Group != nil {
			info.Remote = vx.Group.String()
		}
		nic, why := d.underlay(host, n, vx)
		if nic != nil {
			info.NIC = nic.Attrs().Index
			d.add(host, nic, RoleNIC)
		} else {
			d.warnf(nicWarning+"%s: %s", vx.Name, why)
		}
		dev := d.add(n, l, RoleOverlay)
		d.setVXLAN(dev, info)
		if vx.MasterIndex != 0 {
			if br := n.link(vx.MasterIndex); br != nil && br.Type() == "bridge" {
				bridges = append(bridges, br)
			}
		} else {
			routed = append(routed, l)
		}
	}
	for _, br := range bridges {
		d.add(n, br, RoleBridge)
		for _, l := range n.links {
			if l.Attrs().MasterIndex == br.Attrs().Index && l.Type() == "veth" {
				d.veth(n, l)
			}
		}
	}
	if len(routed) > 0 {
		d.routed(n, routed)
	}
	return nil
}

func (d *discoverer) setVXLAN(dev Device, info *VXLAN) {
	for i := range d.o.Devices {
		if d.o.Devices[i].Key() == dev.Key() {
			d.o.Devices[i].VXLAN = info
		}
	}
}

// veth adds a host-side veth and the container end of it.
func (d *discoverer) veth(n *nsInfo, l netlink.Link) {
	hv := d.add(n, l, RoleHostVeth)
	a := l.Attrs()
	peerNS := n
	if a.NetNsID >= 0 {
		c, ok := n.view.resolve(a.NetNsID)
		if !ok {
			d.warnf("%s: its peer's network namespace (nsid %d) has no path falcon can open (no /run/netns entry, no process in it)", hv, a.NetNsID)
			return
		}
		var err error
		if peerNS, err = d.openNS(c.name); err != nil {
			d.warnf("%s: %v", hv, err)
			return
		}
	}
	if a.ParentIndex == 0 {
		d.warnf("%s: the kernel did not report its peer", hv)
		return
	}
	pl := peerNS.link(a.ParentIndex)
	if pl == nil {
		d.warnf("%s: peer ifindex %d not found in network namespace %s", hv, a.ParentIndex, peerNS.name)
		return
	}
	ct := d.add(peerNS, pl, RoleContainer)
	for i := range d.o.Devices {
		switch d.o.Devices[i].Key() {
		case hv.Key():
			d.o.Devices[i].Peer = &Peer{Netns: ct.Netns, Ifindex: ct.Ifindex, Name: ct.Name}
		case ct.Key():
			d.o.Devices[i].Peer = &Peer{Netns: hv.Netns, Ifindex: hv.Ifindex, Name: hv.Name}
		}
	}
}

// underlay finds the device in host that carries vx's encapsulated
// packets: the device it is bound to, else the one owning its local
// address, else the one that routes to its remote or to its FDB entries'
// destinations.
func (d *discoverer) underlay(host, n *nsInfo, vx *netlink.Vxlan) (netlink.Link, string) {
	if vx.VtepDevIndex != 0 {
		if l := host.link(vx.VtepDevIndex); l != nil {
			return l, ""
		}
		return nil, fmt.Sprintf("its device (ifindex %d) is not in the host namespace", vx.VtepDevIndex)
	}
	if vx.SrcAddr != nil && !vx.SrcAddr.IsUnspecified() {
		if l := ownerOf(host, vx.SrcAddr); l != nil {
			return l, ""
		}
	}
	dsts := []net.IP{}
	if vx.Group != nil && !vx.Group.IsUnspecified() && !vx.Group.IsMulticast() {
		dsts = append(dsts, vx.Group)
	}
	for _, fam := range []int{unix.AF_BRIDGE} {
		ns, _ := n.h.NeighList(vx.Index, fam)
		for _, e := range ns {
			if e.IP != nil && !e.IP.IsUnspecified() {
				dsts = append(dsts, e.IP)
			}
		}
	}
	for _, ip := range dsts {
		rs, err := host.h.RouteGet(ip)
		if err != nil || len(rs) == 0 {
			continue
		}
		if l := host.link(rs[0].LinkIndex); l != nil && l.Type() != "vxlan" && l.Attrs().Flags&net.FlagLoopback == 0 {
			return l, ""
		}
	}
	if vx.Group != nil && vx.Group.IsMulticast() {
		return nil, "it uses multicast group " + vx.Group.String() + " with no device; name the NIC with --devices"
	}
	if len(dsts) == 0 {
		return nil, "it has no device, local address, remote or forwarding entries yet; name the NIC with --devices"
	}
	return nil, "no route in the host namespace leads to its remotes; name the NIC with --devices"
}

func ownerOf(n *nsInfo, ip net.IP) netlink.Link {
	addrs, err := n.h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			return n.link(a.LinkIndex)
		}
	}
	return nil
}
