package doctor

import (
	"fmt"
	"net"
	"strings"

	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/kernel"
	"github.com/falconnet/falcon/internal/netns"
)

// Kernel feature names (ethtool -k shows the same strings).
const (
	featTxCsum    = "tx-checksum-ip-generic"
	featGRO       = "rx-gro"
	featGSO       = "tx-generic-segmentation"
	featTSO       = "tx-tcp-segmentation"
	featTnlTSO    = "tx-udp_tnl-segmentation"
	featTnlCsmTSO = "tx-udp_tnl-csum-segmentation"
)

func checkOffloads(st *state, k kernel.Release) []Finding {
	var fs []Finding
	for _, d := range st.devs {
		if d.featErr != nil {
			fs = append(fs, Finding{Check: CheckGRO, Severity: Warn, Device: d.Name, Netns: d.Netns,
				Message: fmt.Sprintf("cannot read offload features: %v", d.featErr)})
			continue
		}
		switch d.Role {
		case discover.RoleOverlay:
			fs = append(fs, checkTxChecksum(st, d, k), checkUDPCsum(st, d))
			fs = append(fs, checkGRO(st, d), checkGSO(d))
		case discover.RoleNIC, discover.RoleHostVeth, discover.RoleContainer:
			fs = append(fs, checkGRO(st, d), checkGSO(d))
		}
	}
	return fs
}

// checkTxChecksum: the tracker history behind this check.
//
// Kernels before 5.7 computed wrong UDP checksums for VXLAN packets that
// iptables MASQUERADE --random-fully (kube-proxy) rewrote, which showed as
// 63 s delays reaching Services (projectcalico/calico#3145,
// flannel-io/flannel#1279). The workaround everybody shipped is
// `ethtool -K <vxlan> tx-checksum-ip-generic off`: Felix applied it below
// 5.7 (projectcalico/felix#2811); after reports on later kernels
// (calico#4865, 5.8) and on VMware vmxnet3 NICs (calico#4727) Calico
// applied it on all kernels (calico#6842), reverted that (#8746) and
// restored it (#9036); Flannel documents it for NAT'd underlays
// (flannel#1929, #2152).
//
// The workaround is not free: without a checksum feature the kernel drops
// TSO and USO from the device, so every TCP super-packet is segmented in
// software before encapsulation, one VXLAN packet at a time. So:
//   - kernel < 5.7 with the offload on: warn, the bug is live; turning it
//     off is safe (costs CPU, cannot break anything).
//   - kernel >= 5.7 with the offload off: warn, a workaround that costs
//     throughput; turning it on is NOT safe to automate, because the
//     remaining causes (NAT'd underlays, some hypervisor NICs) are invisible
//     from here and Calico may have switched it off on purpose.
//   - vmxnet3 underlay with the offload on: info, the known hypervisor case.
func checkTxChecksum(st *state, d *devState, k kernel.Release) Finding {
	f := Finding{Check: CheckTxChecksum, Device: d.Name, Netns: d.Netns}
	on, ok := d.active(featTxCsum)
	if !ok {
		f.Severity, f.Message = Info, "the device reports no "+featTxCsum+" feature"
		return f
	}
	switch {
	case on && !k.AtLeast(5, 7):
		f.Severity = Warn
		f.Message = fmt.Sprintf("tx checksum offload is on and kernel %s is older than 5.7: VXLAN packets rewritten by "+
			"iptables MASQUERADE --random-fully get wrong checksums (Calico #3145, Flannel #1279: 63 s delays to Services)", k)
		f.Fix, f.Safe = ethtoolCmd(d, []string{featTxCsum}, false), true
		f.apply = setFeatures(d, []string{featTxCsum}, false)
	case !on && k.AtLeast(5, 7):
		f.Severity = Warn
		f.Message = "tx checksum offload is off, so the kernel also turned TSO off here: every TCP super-packet is " +
			"segmented in software before encapsulation. It is the workaround for a VXLAN checksum bug fixed in 5.7 and " +
			"reported since on some kernels and on VMware vmxnet3 NICs; Calico turns it off by default, Flannel advises it " +
			"for NAT'd underlays. Turn it back on and test Service traffic across nodes; keep it on by telling the CNI " +
			"(Calico: FelixConfiguration featureDetectOverride ChecksumOffloadBroken=false)"
		f.Fix = ethtoolCmd(d, []string{featTxCsum}, true)
	case on && nicDriver(st, d) == "vmxnet3":
		f.Severity = Info
		f.Message = "tx checksum offload is on over a vmxnet3 NIC; some ESXi setups corrupt VXLAN checksums " +
			"(Flannel troubleshooting, 'NAT'): if pods lose TCP traffic, turn it off"
		f.Fix = ethtoolCmd(d, []string{featTxCsum}, false)
	default:
		f.Severity = OK
		f.Message = fmt.Sprintf("tx checksum offload %s, as kernel %s wants it", onWord(on), k)
	}
	return f
}

// checkUDPCsum: zero outer UDP checksums (VXLAN udpcsum off, or
// udp6zerocsumtx over IPv6).
//
// The sender saves little: with checksum offload or local checksum offload
// the outer checksum is almost free. The receiver pays: a valid outer
// checksum lets GRO convert it into CHECKSUM_COMPLETE for the inner packet
// ("checksum-unnecessary conversion"), so the inner TCP/UDP checksum is
// verified without touching the payload again; with a zero outer checksum
// there is nothing to convert, and unless the NIC hands up full-packet
// checksums (CHECKSUM_COMPLETE) or parses VXLAN itself, the inner checksum
// is computed in software, byte by byte, in the NIC's softirq — the stage
// that limits a single overlay flow. (The kernels of the early udp_offload
// code went further and skipped tunnel GRO altogether for packets the NIC
// had not validated, zero checksums included; current ones aggregate them,
// at this cost.) Over IPv6 a zero checksum is dropped outright unless the
// receiver set udp6zerocsumrx.
//
// The exception: NICs that can segment tunnels (tx-udp_tnl-segmentation)
// but not tunnels with outer checksums (tx-udp_tnl-csum-segmentation) lose
// TSO for encapsulated packets when checksums are on; there zero checksums
// are the better deal for the sender, and the finding is only info.
//
// Never fixed in place: the kernel refuses to change UDP_CSUM on an
// existing device ("Cannot change UDP_CSUM flag"), and recreating a CNI's
// device on a live node cuts every pod off.
func checkUDPCsum(st *state, d *devState) Finding {
	f := Finding{Check: CheckUDPCsum, Device: d.Name, Netns: d.Netns}
	vx := d.vxlan
	if vx == nil {
		f.Severity, f.Message = Info, "not a VXLAN device netlink could read"
		return f
	}
	if vx.FlowBased {
		f.Severity = Info
		f.Message = "flow-based (external) device: the checksum flag comes with each packet's tunnel metadata"
		return f
	}
	v6 := underlayIPv6(st, d)
	zero := !vx.UDPCSum
	flag := "udpcsum"
	if v6 {
		zero, flag = vx.UDP6ZeroCSumTx, "noudp6zerocsumtx"
	}
	if !zero {
		f.Severity, f.Message = OK, "outer UDP checksums are on"
		return f
	}
	f.Severity = Warn
	f.Message = "sends zero outer UDP checksums: receivers cannot turn the outer checksum into a verified inner one, " +
		"so unless their NIC delivers full-packet checksums or parses VXLAN, GRO checksums every inner payload in software " +
		"in the NIC's softirq"
	if nic := nicOf(st, d); nic != nil {
		tnl, _ := nic.active(featTnlTSO)
		csm, _ := nic.active(featTnlCsmTSO)
		if tnl && !csm {
			f.Severity = Info
			f.Message += fmt.Sprintf("; but %s segments tunnels only without outer checksums, so here zero "+
				"checksums keep its tunnel TSO", nic.Name)
		}
	}
	f.Fix = fmt.Sprintf("cannot be changed on a live device (the kernel refuses); recreate %s with '%s' from the CNI's "+
		"side: the kernel default for a VXLAN device created without the attribute is checksums on, so find the "+
		"configuration or tool that asks for zero checksums (e.g. 'noudpcsum') and drop it", d.Name, flag)
	return f
}

// checkGRO: GRO off on the NIC or the VXLAN device is always a finding: the
// NIC's GRO aggregates the encapsulated flow, the VXLAN device's gro_cells
// aggregate the inner one, and without them every packet crosses the
// bridge, the veth and the container's stack alone.
//
// veths are different: GRO off is the kernel's default for them (GRO on a
// veth means a NAPI poll on the receiving side), packets reach them already
// aggregated by the VXLAN device, and turning it on changes the path that
// RPS steering works on. So a veth with GRO off is only info, unless other
// veths of the same role on this overlay have it on (someone tuned them,
// and this one was missed or lost its setting when its container was
// recreated): then warn, and turning it on is safe.
func checkGRO(st *state, d *devState) Finding {
	f := Finding{Check: CheckGRO, Device: d.Name, Netns: d.Netns}
	on, ok := d.active(featGRO)
	if !ok {
		f.Severity, f.Message = Info, "the device reports no GRO feature"
		return f
	}
	if on {
		f.Severity, f.Message = OK, "GRO on"
		return f
	}
	f.Fix, f.Safe = ethtoolCmd(d, []string{featGRO}, true), d.changeable(featGRO)
	f.apply = setFeatures(d, []string{featGRO}, true)
	if !f.Safe {
		f.Fix = "the driver does not let GRO be changed (fixed off)"
		f.apply = nil
	}
	if d.Kind != "veth" {
		f.Severity = Warn
		f.Message = "GRO is off: " + groWhy(d.Role)
		return f
	}
	switch on := peersWithGRO(st, d); {
	case on != "":
		f.Severity = Warn
		f.Message = fmt.Sprintf("GRO is off here but on for %s (same role on this overlay): a lost or missed setting", on)
	default:
		f.Severity = Info
		f.Message = "GRO off (the kernel's default for veth; packets arrive already aggregated by the VXLAN device)"
	}
	return f
}

func groWhy(r discover.Role) string {
	if r == discover.RoleOverlay {
		return "inner packets are not aggregated, so each one crosses the bridge, veth and container stack alone"
	}
	return "encapsulated packets are not aggregated before decapsulation"
}

// peersWithGRO lists other devices of d's role that have GRO on.
func peersWithGRO(st *state, d *devState) string {
	var names []string
	for _, o := range st.role(d.Role) {
		if o == d || o.Kind != d.Kind {
			continue
		}
		if on, _ := o.active(featGRO); on {
			names = append(names, o.Name+" in "+netns.Label(o.Netns))
		}
	}
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("%d more", len(names)-3))
	}
	return strings.Join(names, ", ")
}

// checkGSO: GSO and TSO. Without them a super-packet is cut into MSS-sized
// packets at this device, and since veths do not aggregate again, each one
// crosses the rest of the path alone. TSO needs a tx checksum feature; where
// that is off too, the fix has to turn it on, which is not automated (tx
// checksum is switched off on purpose in nested or NAT'd setups; for the
// VXLAN device the tx-checksum check owns it). On a veth that is the NIC
// only GSO counts: the testbed's wire, like any veth used as a NIC under
// XDP cpumap, runs with tx checksum (and so TSO) off on purpose.
func checkGSO(d *devState) Finding {
	f := Finding{Check: CheckGSO, Device: d.Name, Netns: d.Netns}
	var off []string
	if on, ok := d.active(featGSO); ok && !on {
		off = append(off, featGSO)
	}
	csum, _ := d.active(featTxCsum)
	wantTSO := !(d.Role == discover.RoleNIC && d.Kind == "veth") && !(d.Role == discover.RoleOverlay && !csum)
	if on, ok := d.active(featTSO); ok && !on && wantTSO && d.changeable(featTSO) {
		off = append(off, featTSO)
	}
	if len(off) == 0 {
		f.Severity, f.Message = OK, "GSO/TSO on"
		return f
	}
	f.Severity = Warn
	f.Message = strings.Join(off, ", ") + " off: super-packets are segmented here and cross the rest of the path one by one"
	names := off
	f.Safe = true
	if contains(off, featTSO) && !csum {
		names = append([]string{featTxCsum}, off...)
		f.Safe = false
		f.Message += "; TSO needs tx checksum offload, which is off too (check why before turning it on)"
	}
	f.Fix = ethtoolCmd(d, names, true)
	if f.Safe {
		f.apply = setFeatures(d, names, true)
	}
	return f
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func onWord(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// nicOf returns the underlay NIC of overlay device d.
func nicOf(st *state, d *devState) *devState {
	nics := st.role(discover.RoleNIC)
	if d.VXLAN != nil && d.VXLAN.NIC != 0 {
		if n := st.find(st.ov.Netns, d.VXLAN.NIC); n != nil {
			return n
		}
	}
	if len(nics) == 1 {
		return nics[0]
	}
	return nil
}

func nicDriver(st *state, d *devState) string {
	if n := nicOf(st, d); n != nil {
		return n.driver
	}
	return ""
}

// underlayIPv6 reports whether d encapsulates over IPv6: its local or
// remote address says so, or else its NIC has only IPv6 addresses.
func underlayIPv6(st *state, d *devState) bool {
	if d.VXLAN != nil {
		for _, s := range []string{d.VXLAN.Local, d.VXLAN.Remote} {
			if ip := net.ParseIP(s); ip != nil && !ip.IsUnspecified() {
				return ip.To4() == nil
			}
		}
	}
	if n := nicOf(st, d); n != nil {
		return n.hasV6 && !n.hasV4
	}
	return false
}
