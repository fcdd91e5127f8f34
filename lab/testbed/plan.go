package testbed

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
)

// The address plan (family.go) lives only inside the testbed's
// namespaces, so testbeds reuse it without colliding. It follows what each
// system hands out by default, so captures and routing tables look
// familiar.

// OverlayMTU is the overlay's and the containers' MTU: 1500 on the wire
// minus 50 of VXLAN over IPv4. Over an IPv6 wire VXLAN takes 70, so the
// IPv6 testbeds run the wire at 1520 (a VM's or a cloud's underlay often
// allows more than 1500) and every layout keeps the same MTU.
const OverlayMTU = 1450

// layoutInfo is what differs between layouts besides addresses.
type layoutInfo struct {
	overlay    string
	vni, port  int
	bridge     string
	vethPrefix string
	vethHex    int // hex digits after the prefix, as the real system names them
}

var layoutInfos = map[string]layoutInfo{
	"host":    {},
	"vxlan":   {overlay: "vxlan0", vni: 100, port: 4789},
	"docker":  {overlay: "vxlan0", vni: 256, port: 4789, bridge: "br0", vethPrefix: "veth", vethHex: 7},
	"flannel": {overlay: "flannel.1", vni: 1, port: 8472, bridge: "cni0", vethPrefix: "veth", vethHex: 8},
	"calico":  {overlay: "vxlan.calico", vni: 4096, port: 4789, vethPrefix: "cali", vethHex: 11},
	// flanneld's defaults (VNI 1, the kernel's port 8472) and the CNI
	// bridge plugin's (cni0, veth + 8 random hex digits: read back after
	// the ADD).
	"flannel-daemon": {overlay: "flannel.1", vni: 1, port: 8472, bridge: "cni0", vethPrefix: "veth", vethHex: 8},
	// Docker's overlay driver in its sandbox: vxlan0 on br0, veth0, veth1
	// ... (read back after each run, as are the VNI and the addresses).
	"docker-swarm": {overlay: "vxlan0", port: 4789, bridge: "br0", vethPrefix: "veth"},
	// Flannel as the cluster's CNI, as flannel-daemon.
	"k8s": {overlay: "flannel.1", vni: 1, port: 8472, bridge: "cni0", vethPrefix: "veth", vethHex: 8},
	// Cilium's VXLAN device (its VNI is the sender's security identity,
	// no one number) and its host veths, lxc + 12 hex digits of the
	// endpoint's digest (pkg/datapath/connector: Endpoint2IfName).
	"k8s-cilium": {overlay: "cilium_vxlan", port: 8472, vethPrefix: "lxc", vethHex: 12},
}

var hostNames = [2]string{"h1", "h2"}

// plan computes the whole testbed of a valid spec; it is deterministic, so
// device names and addresses are stable across runs.
func plan(s Spec) *Testbed {
	k := s.Containers
	if k == 0 {
		k = 1
	}
	li := layoutInfos[s.Layout]
	t := &Testbed{Name: s.Name, Layout: s.Layout, IPv6: s.IPv6, NetworkPolicy: s.NetworkPolicy}
	ips := t.ips()
	for hi := range t.Hosts {
		h := Host{
			Name:    hostNames[hi],
			Netns:   hostNS(s.Name, hostNames[hi]),
			NIC:     "eth0",
			Addr:    ips.wire(hi),
			Overlay: li.overlay,
			VNI:     li.vni,
			Port:    li.port,
			Bridge:  li.bridge,
		}
		switch s.Layout {
		case "vxlan":
			h.OverlayAddr = ips.vxlan(hi)
		case "flannel":
			h.OverlayAddr = ips.flannel(hi, 0)
			h.Overlay = ips.flannelDev
		case "flannel-daemon":
			h.Overlay = ips.flannelDev // over IPv6: flannel-v6.1 (and flannel.1 beside it)
		case "calico":
			h.OverlayAddr = ips.calico(hi, 0)
			h.Overlay = ips.calicoDev
		}
		if li.vethPrefix != "" {
			for i := range k {
				h.Containers = append(h.Containers, Container{
					Name:     fmt.Sprintf("c%d", i),
					Netns:    containerNS(s.Name, h.Name, i),
					Dev:      "eth0",
					Addr:     t.containerAddr(hi, i),
					HostVeth: li.vethPrefix + digest(s.Name, h.Name, i)[:li.vethHex],
				})
			}
		}
		t.Hosts[hi] = h
	}
	return t
}

// dockerSlots is each host's share of Docker's one /24 subnet.
const dockerSlots = 100

// containerAddr is the address of slot i of host hi's containers.
func (t *Testbed) containerAddr(hi, i int) string {
	ips := t.ips()
	switch t.Layout {
	case "docker":
		return ips.docker(2 + hi*dockerSlots + i)
	case "flannel":
		return ips.flannel(hi, 2+i) // 1 is cni0
	case "flannel-daemon":
		return "" // host-local's choice, known after the CNI ADD
	case "docker-swarm":
		return "" // Docker's choice, known after the run
	case "k8s", "k8s-cilium":
		return "" // the CNI's choice, read back from the pod
	default: // calico
		return ips.calico(hi, 1+i) // 0 is the VXLAN device
	}
}

func digest(parts ...any) string {
	sum := sha1.Sum([]byte(fmt.Sprint(parts...)))
	return hex.EncodeToString(sum[:])
}

// vtepMAC is the fixed MAC of a host's VXLAN device, so the other host's
// static neighbour and FDB entries can name it before it exists, as the
// Flannel and Calico agents write them.
func vtepMAC(name string, hi int) string { return localMAC("vtep", name, hi) }

// nicMAC is host hi's end of the wire between the hosts.
func nicMAC(name string, hi int) string { return localMAC("nic", name, hi) }

// localMAC is a stable unicast, locally administered MAC for one of the
// testbed's devices.
func localMAC(kind, name string, hi int) string {
	b, _ := hex.DecodeString(digest(kind, name, hi)[:12])
	b[0] = b[0]&0xfe | 0x02
	return net.HardwareAddr(b).String()
}
