package doctor

import (
	"fmt"

	"github.com/falconnet/falcon/internal/discover"
)

// VXLAN's encapsulation: outer Ethernet 14 is not counted against the NIC
// MTU, so IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14 = 50, IPv6 70.
const (
	vxlanOverhead4 = 50
	vxlanOverhead6 = 70
)

// checkMTU follows the path NIC -> VXLAN device -> bridge -> host veth ->
// container eth0.
//
// A VXLAN device above NIC MTU minus the overhead is an error that no fix
// here may touch: lowering it alone makes the bridge drop what containers
// still send, and raising the NIC MTU depends on the network beyond the
// host. The CNI's MTU setting has to change, and its pods be recreated.
//
// A bridge, host veth or container eth0 above the overlay MTU is lowered to
// it by --fix. That is safe: all three CNIs mean these MTUs to equal the
// overlay's, and lowering only takes away packet sizes that could never
// cross the overlay anyway (a bridge drops frames above the egress port's
// MTU without telling anyone, which is the classic "ping works, large
// replies hang" bug). Raising an MTU that is merely smaller than it could be
// is left to the CNI (info only). A veth pair with different MTUs drops, at
// the smaller end, what the larger end sends; the larger end is lowered.
func checkMTU(st *state) []Finding {
	var fs []Finding
	for _, d := range st.devs {
		switch d.Role {
		case discover.RoleOverlay:
			fs = append(fs, overlayMTU(st, d))
		case discover.RoleBridge, discover.RoleHostVeth, discover.RoleContainer:
			fs = append(fs, pathMTU(st, d))
		}
	}
	return fs
}

func overlayMTU(st *state, d *devState) Finding {
	f := Finding{Check: CheckMTU, Device: d.Name, Netns: d.Netns}
	nic := nicOf(st, d)
	if nic == nil {
		f.Severity, f.Message = Info, fmt.Sprintf("MTU %d; the NIC under it is unknown, so it cannot be checked", d.MTU)
		return f
	}
	over, fam := vxlanOverhead4, "IPv4"
	if underlayIPv6(st, d) {
		over, fam = vxlanOverhead6, "IPv6"
	}
	limit := nic.MTU - over
	switch {
	case d.MTU > limit:
		f.Severity = Error
		f.Message = fmt.Sprintf("MTU %d is above %s MTU %d minus %d (VXLAN over %s): full-size packets are fragmented "+
			"or dropped on the underlay", d.MTU, nic.Name, nic.MTU, over, fam)
		f.Fix = fmt.Sprintf("set the CNI's MTU to %d (Flannel: derived from the NIC at start; Calico: vxlanMTU in "+
			"FelixConfiguration; Docker: -o com.docker.network.driver.mtu=%d) and recreate the pods; or raise the "+
			"underlay MTU end to end", limit, limit)
	case d.MTU < limit:
		f.Severity = Info
		f.Message = fmt.Sprintf("MTU %d; %s (MTU %d) would carry %d", d.MTU, nic.Name, nic.MTU, limit)
	default:
		f.Severity = OK
		f.Message = fmt.Sprintf("MTU %d = %s MTU %d - %d", d.MTU, nic.Name, nic.MTU, over)
	}
	return f
}

func pathMTU(st *state, d *devState) Finding {
	f := Finding{Check: CheckMTU, Device: d.Name, Netns: d.Netns}
	ref, refName := overlayMTUFor(st, d)
	if ref == 0 {
		f.Severity, f.Message = Info, fmt.Sprintf("MTU %d; no overlay device to compare with", d.MTU)
		return f
	}
	lower := func(to int) {
		f.Fix = inNS(d.Netns, fmt.Sprintf("ip link set dev %s mtu %d", d.Name, to))
		f.Safe, f.apply = true, setMTU(d, to)
	}
	var peer *devState
	if d.Peer != nil {
		peer = st.find(d.Peer.Netns, d.Peer.Ifindex)
	}
	switch {
	case d.MTU > ref:
		f.Severity = Error
		if d.Role == discover.RoleBridge {
			f.Severity = Warn // the bridge's own MTU limits only what the host sends through it
		}
		f.Message = fmt.Sprintf("MTU %d is above the overlay MTU %d (%s): larger packets are dropped silently on the way", d.MTU, ref, refName)
		lower(ref)
	case peer != nil && d.MTU > peer.MTU:
		f.Severity = Warn
		f.Message = fmt.Sprintf("MTU %d is above its veth peer %s's %d: the peer drops what this end sends above %d", d.MTU, peer.Name, peer.MTU, peer.MTU)
		lower(peer.MTU)
	case d.MTU < ref && d.Role == discover.RoleContainer:
		f.Severity = Info
		f.Message = fmt.Sprintf("MTU %d is below the overlay MTU %d (%s): more packets than needed", d.MTU, ref, refName)
	default:
		f.Severity = OK
		f.Message = fmt.Sprintf("MTU %d fits the overlay MTU %d (%s)", d.MTU, ref, refName)
	}
	return f
}

// overlayMTUFor returns the MTU of the VXLAN device(s) that d's traffic
// crosses: the overlay ports of its bridge, else (routed: Calico, Flannel's
// cni0) the VXLAN devices of its namespace, else all of them.
func overlayMTUFor(st *state, d *devState) (int, string) {
	if d.Role == discover.RoleContainer {
		if d.Peer == nil {
			return 0, ""
		}
		hv := st.find(d.Peer.Netns, d.Peer.Ifindex)
		if hv == nil {
			return 0, ""
		}
		d = hv
	}
	bridge := ""
	switch {
	case d.Role == discover.RoleBridge:
		bridge = d.Name
	case d.Master != "":
		bridge = d.Master
	}
	pick := func(ok func(*devState) bool) (int, string) {
		best, name := 0, ""
		for _, o := range st.role(discover.RoleOverlay) {
			if ok(o) && (best == 0 || o.MTU < best) {
				best, name = o.MTU, o.Name
			}
		}
		return best, name
	}
	if bridge != "" {
		if m, n := pick(func(o *devState) bool { return o.Netns == d.Netns && o.Master == bridge }); m > 0 {
			return m, n
		}
	}
	if m, n := pick(func(o *devState) bool { return o.Netns == d.Netns }); m > 0 {
		return m, n
	}
	return pick(func(*devState) bool { return true })
}
