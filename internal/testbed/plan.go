package testbed

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
)

// The address plan. All of it lives only inside the testbed's namespaces,
// so testbeds reuse it without colliding. It follows what each system
// hands out by default, so captures and routing tables look familiar.
const (
	wireNet   = "10.10.0.%d"    // underlay: h1 .1, h2 .2 (/24)
	vxlanNet  = "10.20.0.%d"    // vxlan layout overlay: h1 .1, h2 .2 (/24)
	dockerNet = "10.0.1.%d"     // one /24 across both hosts (Docker overlay)
	flannelNt = "10.244.%d.%d"  // a /24 per host (Flannel's 10.244.0.0/16)
	calicoNet = "192.168.%d.%d" // a /26 block per host (Calico's 192.168.0.0/16)

	OverlayMTU = 1450 // overlay and container MTU: 1500 on the wire minus 50 of VXLAN
)

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
	t := &Testbed{Name: s.Name, Layout: s.Layout}
	for hi := range t.Hosts {
		h := Host{
			Name:    hostNames[hi],
			Netns:   hostNS(s.Name, hostNames[hi]),
			NIC:     "eth0",
			Addr:    fmt.Sprintf(wireNet, hi+1),
			Overlay: li.overlay,
			VNI:     li.vni,
			Port:    li.port,
			Bridge:  li.bridge,
		}
		switch s.Layout {
		case "vxlan":
			h.OverlayAddr = fmt.Sprintf(vxlanNet, hi+1)
		case "flannel":
			h.OverlayAddr = fmt.Sprintf(flannelNt, hi, 0)
		case "calico":
			h.OverlayAddr = calicoBlock(hi, 0)
		}
		if li.vethPrefix != "" {
			for i := range k {
				h.Containers = append(h.Containers, Container{
					Name:     fmt.Sprintf("c%d", i),
					Netns:    containerNS(s.Name, h.Name, i),
					Dev:      "eth0",
					Addr:     containerAddr(s.Layout, hi, i),
					HostVeth: li.vethPrefix + digest(s.Name, h.Name, i)[:li.vethHex],
				})
			}
		}
		t.Hosts[hi] = h
	}
	return t
}

func containerAddr(layout string, hi, i int) string {
	switch layout {
	case "docker":
		return fmt.Sprintf(dockerNet, 2+hi*64+i)
	case "flannel":
		return fmt.Sprintf(flannelNt, hi, 2+i) // .1 is cni0
	case "flannel-daemon":
		return "" // host-local's choice, known after the CNI ADD
	default: // calico
		return calicoBlock(hi, 1+i) // .0 is vxlan.calico
	}
}

// calicoBlock returns address off of host hi's /26 block.
func calicoBlock(hi, off int) string { return fmt.Sprintf(calicoNet, hi+1, off) }

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

// dockerMAC is Docker's container MAC: 02:42 followed by the IPv4 address.
func dockerMAC(addr string) string {
	ip := net.ParseIP(addr).To4()
	return net.HardwareAddr{0x02, 0x42, ip[0], ip[1], ip[2], ip[3]}.String()
}
