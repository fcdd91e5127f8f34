package discover

import (
	"net"

	"github.com/vishvananda/netlink"
)

// routed finds the containers behind VXLAN devices that are no bridge port:
// the overlay routes into them. Calico routes each container's /32 to its
// veth; Flannel routes the node's subnet to the cni0 bridge. Only routes and
// bridges inside the overlay's address space count, so that other bridges
// (docker0) and routed veths (VMs, a testbed's wire) are left alone.
func (d *discoverer) routed(n *nsInfo, vxs []netlink.Link) {
	space := d.overlaySpace(n, vxs)
	if len(space) == 0 {
		return // no pod network: applications use the VXLAN device directly
	}
	inSpace := func(ip net.IP) bool {
		for _, s := range space {
			if s.Contains(ip) {
				return true
			}
		}
		return false
	}
	for _, l := range n.links {
		a := l.Attrs()
		switch {
		case l.Type() == "veth" && a.MasterIndex == 0 && a.NetNsID >= 0:
			rs, err := n.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: a.Index}, netlink.RT_FILTER_OIF)
			if err != nil {
				continue
			}
			for _, r := range rs {
				if r.Dst == nil {
					continue
				}
				if ones, bits := r.Dst.Mask.Size(); ones == bits && inSpace(r.Dst.IP) {
					d.veth(n, l)
					break
				}
			}
		case l.Type() == "bridge" && !d.seen[keyOf(n, a.Index)]:
			addrs, err := n.h.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				continue
			}
			for _, ad := range addrs {
				if inSpace(ad.IP) {
					d.add(n, l, RoleBridge)
					for _, p := range n.links {
						if p.Attrs().MasterIndex == a.Index && p.Type() == "veth" {
							d.veth(n, p)
						}
					}
					break
				}
			}
		}
	}
}

func keyOf(n *nsInfo, idx int) string { return Device{Netns: n.name, Ifindex: idx}.Key() }

// overlaySpace is the smallest prefix per address family that covers the
// VXLAN devices' own addresses and the destinations routed through them:
// the pod network as far as this node can tell. With a single address (no
// other node known yet) it widens to a /16 (IPv4) or /64 (IPv6), the
// smallest pod networks Flannel and Calico use by default.
func (d *discoverer) overlaySpace(n *nsInfo, vxs []netlink.Link) []*net.IPNet {
	var v4, v6 []net.IP
	add := func(ip net.IP) {
		if ip == nil || ip.IsUnspecified() || ip.IsLinkLocalUnicast() {
			return
		}
		if ip4 := ip.To4(); ip4 != nil {
			v4 = append(v4, ip4)
		} else {
			v6 = append(v6, ip)
		}
	}
	for _, vx := range vxs {
		addrs, _ := n.h.AddrList(vx, netlink.FAMILY_ALL)
		for _, a := range addrs {
			add(a.IP)
		}
		rs, _ := n.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: vx.Attrs().Index}, netlink.RT_FILTER_OIF)
		for _, r := range rs {
			if r.Dst != nil {
				add(r.Dst.IP)
			}
		}
	}
	var out []*net.IPNet
	if p := cover(v4, 32, 16); p != nil {
		out = append(out, p)
	}
	if p := cover(v6, 128, 64); p != nil {
		out = append(out, p)
	}
	return out
}

// cover returns the longest prefix holding all ips, at most single bits long
// when there is one address only.
func cover(ips []net.IP, bits, single int) *net.IPNet {
	if len(ips) == 0 {
		return nil
	}
	ones := bits
	for _, ip := range ips[1:] {
		ones = min(ones, commonBits(ips[0], ip))
	}
	if len(ips) == 1 || allEqual(ips) {
		ones = single
	}
	m := net.CIDRMask(ones, bits)
	return &net.IPNet{IP: ips[0].Mask(m), Mask: m}
}

func allEqual(ips []net.IP) bool {
	for _, ip := range ips[1:] {
		if !ip.Equal(ips[0]) {
			return false
		}
	}
	return true
}

func commonBits(a, b net.IP) int {
	n := 0
	for i := range a {
		x := a[i] ^ b[i]
		if x == 0 {
			n += 8
			continue
		}
		for x&0x80 == 0 {
			n++
			x <<= 1
		}
		return n
	}
	return n
}
