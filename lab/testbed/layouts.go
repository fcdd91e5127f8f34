package testbed

import "fmt"

// vxlan: the "Linux overlay": a VXLAN device in each host namespace,
// applications in the host namespaces. Unknown destinations (ARP, IPv6
// neighbour solicitations) flood to the other host; replies are learned.
func (b *builder) vxlan(hi int) error {
	h, p, ips := b.t.Hosts[hi], b.peer(hi), b.t.ips()
	if err := b.ip(h.Netns,
		fmt.Sprintf("link add %s mtu %d type vxlan id %d local %s dev %s dstport %d", h.Overlay, OverlayMTU, h.VNI, h.Addr, h.NIC, h.Port),
		fmt.Sprintf("addr add %s/%d dev %s", h.OverlayAddr, ips.subnet, h.Overlay),
		fmt.Sprintf("link set %s up", h.Overlay)); err != nil {
		return err
	}
	return b.fdb(h.Netns, fmt.Sprintf("fdb append 00:00:00:00:00:00 dev %s dst %s", h.Overlay, p.Addr))
}

// docker: Docker's overlay driver: vxlan0 and the containers' veths on the
// bridge br0, one subnet across hosts. Like Docker, the VXLAN device
// answers ARP and neighbour solicitations itself (proxy) from static
// neighbour entries and sends to remote MACs by static FDB entries, so
// nothing floods. Over an IPv6 wire it needs its local address to open an
// IPv6 socket (Docker's IPv6 underlay gives it one too).
func (b *builder) docker(hi int) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	local := ""
	if b.t.IPv6 {
		local = "local " + h.Addr
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("link add %s mtu %d type bridge", h.Bridge, OverlayMTU),
		fmt.Sprintf("link set %s up", h.Bridge),
		fmt.Sprintf("link add %s mtu %d type vxlan id %d %s dstport %d proxy nolearning", h.Overlay, OverlayMTU, h.VNI, local, h.Port),
		fmt.Sprintf("link set %s master %s up", h.Overlay, h.Bridge)); err != nil {
		return err
	}
	for i := range h.Containers {
		if err := b.wireContainer(hi, &h.Containers[i]); err != nil {
			return err
		}
	}
	for _, c := range p.Containers {
		if err := b.dockerLearn(hi, c); err != nil {
			return err
		}
	}
	return nil
}

// dockerLearn writes what Docker's overlay driver on host hi writes for
// container c of the other host: its address and MAC, and its host's VTEP.
func (b *builder) dockerLearn(hi int, c Container) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	mac := dockerMAC(c.Addr)
	if err := b.ip(h.Netns, fmt.Sprintf("neigh replace %s lladdr %s dev %s nud permanent", c.Addr, mac, h.Overlay)); err != nil {
		return err
	}
	return b.fdb(h.Netns, fmt.Sprintf("fdb replace %s dev %s dst %s self permanent", mac, h.Overlay, p.Addr))
}

// flannel: flanneld's VXLAN backend: flannel.1 (flannel-v6.1 for IPv6)
// holds the host subnet's network address as a single address; the other
// host's subnet is routed onlink via its VXLAN device's address, whose MAC
// and VTEP are static neighbour and FDB entries, as flanneld writes them.
// Containers sit on the cni0 bridge (the CNI bridge plugin), which is
// their gateway.
func (b *builder) flannel(hi int) error {
	h, p, ips := b.t.Hosts[hi], b.peer(hi), b.t.ips()
	if err := b.sysctl(h.Netns, ips.forward, "1"); err != nil {
		return err
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("link add %s address %s mtu %d type vxlan id %d local %s dev %s dstport %d nolearning",
			h.Overlay, vtepMAC(b.t.Name, hi), OverlayMTU, h.VNI, h.Addr, h.NIC, h.Port),
		fmt.Sprintf("addr add %s/%d dev %s", h.OverlayAddr, ips.one, h.Overlay),
		fmt.Sprintf("link set %s up", h.Overlay),
		fmt.Sprintf("link add %s mtu %d type bridge", h.Bridge, OverlayMTU),
		fmt.Sprintf("addr add %s/%d dev %s", ips.flannel(hi, 1), ips.subnet, h.Bridge),
		fmt.Sprintf("link set %s up", h.Bridge)); err != nil {
		return err
	}
	for i := range h.Containers {
		if err := b.wireContainer(hi, &h.Containers[i]); err != nil {
			return err
		}
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("route add %s/%d via %s dev %s onlink", p.OverlayAddr, ips.subnet, p.OverlayAddr, h.Overlay),
		fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent", p.OverlayAddr, vtepMAC(b.t.Name, 1-hi), h.Overlay)); err != nil {
		return err
	}
	return b.fdb(h.Netns, fmt.Sprintf("fdb add %s dev %s dst %s self permanent", vtepMAC(b.t.Name, 1-hi), h.Overlay, p.Addr))
}

// calico: Calico's VXLAN mode: no bridge; each container's single address
// is routed to its caliXXXXXXXXXXX veth. Over IPv4 the container's gateway
// is the fake 169.254.1.1, which the veth answers by proxy ARP; over IPv6
// it is the veth's own link-local address. The other host's block is
// routed onlink via its VXLAN device's address, with static neighbour and
// FDB entries as Felix writes them.
func (b *builder) calico(hi int) error {
	h, p, ips := b.t.Hosts[hi], b.peer(hi), b.t.ips()
	if err := b.sysctl(h.Netns, ips.forward, "1"); err != nil {
		return err
	}
	cmds := []string{
		fmt.Sprintf("link add %s address %s mtu %d type vxlan id %d local %s dev %s dstport %d nolearning",
			h.Overlay, vtepMAC(b.t.Name, hi), OverlayMTU, h.VNI, h.Addr, h.NIC, h.Port),
		fmt.Sprintf("addr add %s/%d dev %s", h.OverlayAddr, ips.one, h.Overlay),
		fmt.Sprintf("link set %s up", h.Overlay),
		fmt.Sprintf("route add blackhole %s/%d", h.OverlayAddr, ips.block),
	}
	if !b.t.IPv6 {
		// Proxy ARP answers only for addresses with a unicast route out
		// of another device; a real node's default route provides the one
		// for 169.254.1.1. Here the default gateway is the other host.
		cmds = append(cmds, fmt.Sprintf("route add default via %s dev %s", p.Addr, h.NIC))
	}
	if err := b.ip(h.Netns, cmds...); err != nil {
		return err
	}
	for i := range h.Containers {
		if err := b.wireContainer(hi, &h.Containers[i]); err != nil {
			return err
		}
	}
	if err := b.ip(h.Netns,
		fmt.Sprintf("route add %s/%d via %s dev %s onlink", p.OverlayAddr, ips.block, p.OverlayAddr, h.Overlay),
		fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent", p.OverlayAddr, vtepMAC(b.t.Name, 1-hi), h.Overlay)); err != nil {
		return err
	}
	return b.fdb(h.Netns, fmt.Sprintf("fdb add %s dev %s dst %s self permanent", vtepMAC(b.t.Name, 1-hi), h.Overlay, p.Addr))
}

// container makes the veth pair of container c (host end down, for the
// layout to attach) and configures the container end: address/plen, an
// optional MAC, and a default route via gw; a single IPv4 address gets gw
// as an onlink host route first, as Calico's CNI plugin does. The
// container forwards IPv4, as every container of a host that forwards
// does: a new namespace starts with the initial namespace's forwarding
// settings (net.core.devconf_inherit_init_net 0), and a host that runs
// containers forwards in it, where this machine's may not.
func (b *builder) container(h Host, c Container, plen int, mac, gw string) error {
	if err := b.sysctl(c.Netns, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
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
		ips := b.t.ips()
		if plen == ips.one && !ips.v6 { // an IPv6 link-local gateway needs no route
			cmds = append(cmds, fmt.Sprintf("route add %s dev %s scope link", gw, c.Dev))
		}
		cmds = append(cmds, fmt.Sprintf("%s route add default via %s dev %s", ips.family, gw, c.Dev))
	}
	return b.ip(c.Netns, cmds...)
}
