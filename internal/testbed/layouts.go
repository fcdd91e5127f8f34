package testbed

import "fmt"

// vxlan: the "Linux overlay": a VXLAN device in each host namespace,
// applications in the host namespaces. Unknown destinations (ARP) flood to
// the other host; replies are learned.
func (b *builder) vxlan(hi int) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	if err := b.ip(h.Netns,
		fmt.Sprintf("link add %s mtu %d type vxlan id %d local %s dev %s dstport %d", h.Overlay, OverlayMTU, h.VNI, h.Addr, h.NIC, h.Port),
		fmt.Sprintf("addr add %s/24 dev %s", h.OverlayAddr, h.Overlay),
		fmt.Sprintf("link set %s up", h.Overlay)); err != nil {
		return err
	}
	return b.fdb(h.Netns, fmt.Sprintf("fdb append 00:00:00:00:00:00 dev %s dst %s", h.Overlay, p.Addr))
}

// docker: Docker's overlay driver: vxlan0 and the containers' veths on the
// bridge br0, one subnet across hosts. Like Docker, the VXLAN device
// answers ARP itself (proxy) from static neighbour entries and sends to
// remote MACs by static FDB entries, so nothing floods.
func (b *builder) docker(hi int) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	if err := b.ip(h.Netns,
		fmt.Sprintf("link add %s mtu %d type bridge", h.Bridge, OverlayMTU),
		fmt.Sprintf("link set %s up", h.Bridge),
		fmt.Sprintf("link add %s mtu %d type vxlan id %d dstport %d proxy nolearning", h.Overlay, OverlayMTU, h.VNI, h.Port),
		fmt.Sprintf("link set %s master %s up", h.Overlay, h.Bridge)); err != nil {
		return err
	}
	for _, c := range h.Containers {
		if err := b.container(h, c, 24, dockerMAC(c.Addr), ""); err != nil {
			return err
		}
		if err := b.ip(h.Netns, fmt.Sprintf("link set %s master %s up", c.HostVeth, h.Bridge)); err != nil {
			return err
		}
	}
	for _, c := range p.Containers {
		mac := dockerMAC(c.Addr)
		if err := b.ip(h.Netns, fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent", c.Addr, mac, h.Overlay)); err != nil {
			return err
		}
		if err := b.fdb(h.Netns, fmt.Sprintf("fdb add %s dev %s dst %s self permanent", mac, h.Overlay, p.Addr)); err != nil {
			return err
		}
	}
	return nil
}

// flannel: flanneld's VXLAN backend: flannel.1 holds the host subnet's
// network address as a /32; the other host's /24 is routed onlink via its
// flannel.1 address, whose MAC and VTEP are static neighbour and FDB
// entries, as flanneld writes them. Containers sit on the cni0 bridge
// (the CNI bridge plugin), which is their gateway.
func (b *builder) flannel(hi int) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	gw := fmt.Sprintf(flannelNt, hi, 1)
	if err := b.sysctl(h.Netns, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("link add %s address %s mtu %d type vxlan id %d local %s dev %s dstport %d nolearning",
			h.Overlay, vtepMAC(b.t.Name, hi), OverlayMTU, h.VNI, h.Addr, h.NIC, h.Port),
		fmt.Sprintf("addr add %s/32 dev %s", h.OverlayAddr, h.Overlay),
		fmt.Sprintf("link set %s up", h.Overlay),
		fmt.Sprintf("link add %s mtu %d type bridge", h.Bridge, OverlayMTU),
		fmt.Sprintf("addr add %s/24 dev %s", gw, h.Bridge),
		fmt.Sprintf("link set %s up", h.Bridge)); err != nil {
		return err
	}
	for _, c := range h.Containers {
		if err := b.container(h, c, 24, "", gw); err != nil {
			return err
		}
		if err := b.ip(h.Netns, fmt.Sprintf("link set %s master %s up", c.HostVeth, h.Bridge)); err != nil {
			return err
		}
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("route add %s/24 via %s dev %s onlink", p.OverlayAddr, p.OverlayAddr, h.Overlay),
		fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent", p.OverlayAddr, vtepMAC(b.t.Name, 1-hi), h.Overlay)); err != nil {
		return err
	}
	return b.fdb(h.Netns, fmt.Sprintf("fdb add %s dev %s dst %s self permanent", vtepMAC(b.t.Name, 1-hi), h.Overlay, p.Addr))
}

// calico: Calico's VXLAN mode: no bridge; each container's /32 is routed to
// its caliXXXXXXXXXXX veth, which answers the container's ARP for the fake
// gateway 169.254.1.1 by proxy ARP; the other host's /26 block is routed
// onlink via its vxlan.calico address, with static neighbour and FDB
// entries as Felix writes them.
func (b *builder) calico(hi int) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	if err := b.sysctl(h.Netns, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("link add %s address %s mtu %d type vxlan id %d local %s dev %s dstport %d nolearning",
			h.Overlay, vtepMAC(b.t.Name, hi), OverlayMTU, h.VNI, h.Addr, h.NIC, h.Port),
		fmt.Sprintf("addr add %s/32 dev %s", h.OverlayAddr, h.Overlay),
		fmt.Sprintf("link set %s up", h.Overlay),
		fmt.Sprintf("route add blackhole %s/26", h.OverlayAddr),
		// Proxy ARP answers only for addresses with a unicast route out
		// of another device; a real node's default route provides the one
		// for 169.254.1.1. Here the default gateway is the other host.
		fmt.Sprintf("route add default via %s dev %s", p.Addr, h.NIC)); err != nil {
		return err
	}
	for _, c := range h.Containers {
		if err := b.container(h, c, 32, "", "169.254.1.1"); err != nil {
			return err
		}
		if err := b.sysctl(h.Netns, "net.ipv4.conf."+c.HostVeth+".proxy_arp", "1"); err != nil {
			return err
		}
		// Without this the proxy ARP reply waits up to 0.8 s.
		if err := b.sysctl(h.Netns, "net.ipv4.neigh."+c.HostVeth+".proxy_delay", "0"); err != nil {
			return err
		}
		if err := b.ip(h.Netns,
			fmt.Sprintf("link set %s address ee:ee:ee:ee:ee:ee up", c.HostVeth),
			fmt.Sprintf("route add %s/32 dev %s scope link", c.Addr, c.HostVeth)); err != nil {
			return err
		}
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("route add %s/26 via %s dev %s onlink", p.OverlayAddr, p.OverlayAddr, h.Overlay),
		fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent", p.OverlayAddr, vtepMAC(b.t.Name, 1-hi), h.Overlay)); err != nil {
		return err
	}
	return b.fdb(h.Netns, fmt.Sprintf("fdb add %s dev %s dst %s self permanent", vtepMAC(b.t.Name, 1-hi), h.Overlay, p.Addr))
}

// container makes the veth pair of container c (host end down, for the
// layout to attach) and configures the container end: address/plen, an
// optional MAC, and a default route via gw; a /32 address gets gw as an
// onlink host route first, as Calico's CNI plugin does.
func (b *builder) container(h Host, c Container, plen int, mac, gw string) error {
	if err := b.ip(h.Netns, fmt.Sprintf("link add %s mtu %d type veth peer name %s netns %s", c.HostVeth, OverlayMTU, c.Dev, c.Netns)); err != nil {
		return err
	}
	cmds := []string{fmt.Sprintf("link set %s mtu %d", c.Dev, OverlayMTU)}
	if mac != "" {
		cmds = append(cmds, fmt.Sprintf("link set %s address %s", c.Dev, mac))
	}
	cmds = append(cmds,
		fmt.Sprintf("addr add %s/%d dev %s", c.Addr, plen, c.Dev),
		fmt.Sprintf("link set %s up", c.Dev))
	if gw != "" {
		if plen == 32 {
			cmds = append(cmds, fmt.Sprintf("route add %s dev %s scope link", gw, c.Dev))
		}
		cmds = append(cmds, fmt.Sprintf("route add default via %s dev %s", gw, c.Dev))
	}
	return b.ip(c.Netns, cmds...)
}
