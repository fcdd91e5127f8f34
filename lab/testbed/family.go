package testbed

import (
	"fmt"
	"net"
)

// ipPlan is the address plan of one IP version. IPv6 mirrors the IPv4
// plan's numbers in unique local addresses (fd00::/8), with the prefix
// lengths each system uses: a host's subnet is a /64, one address a /128.
// Calico's blocks are one size larger than its defaults (/26 and /122),
// /25 and /121, so that MaxContainers fit one block per host (Calico's
// blockSize setting does the same; by default it would add a second
// block).
type ipPlan struct {
	v6                    bool
	one, subnet, block    int    // prefix lengths: one address, a host's subnet, a Calico block
	family                string // ip's option for routes, where "default" says nothing of the version
	calicoGW              string // the container's gateway on Calico (its host end answers for it)
	forward               string // the sysctl that makes a host route between its devices
	flannelDev, calicoDev string
}

var (
	plan4 = ipPlan{one: 32, subnet: 24, block: 25, family: "-4", calicoGW: "169.254.1.1",
		forward: "net.ipv4.ip_forward", flannelDev: "flannel.1", calicoDev: "vxlan.calico"}
	// Calico's IPv6 gateway is the link-local address the host end's MAC
	// (ee:ee:ee:ee:ee:ee) gives it, so no proxy is needed; Flannel and
	// Calico name their IPv6 VXLAN devices apart from the IPv4 ones.
	plan6 = ipPlan{v6: true, one: 128, subnet: 64, block: 121, family: "-6", calicoGW: "fe80::ecee:eeff:feee:eeee",
		forward: "net.ipv6.conf.all.forwarding", flannelDev: "flannel-v6.1", calicoDev: "vxlan-v6.calico"}
)

// ips is the plan of a testbed's IP version.
func (t *Testbed) ips() ipPlan {
	if t.IPv6 {
		return plan6
	}
	return plan4
}

// wire is host hi's address on the wire between the hosts.
func (p ipPlan) wire(hi int) string {
	if p.v6 {
		return fmt.Sprintf("fd00:10::%x", hi+1)
	}
	return fmt.Sprintf("10.10.0.%d", hi+1)
}

// vxlan is host hi's address on the vxlan layout's overlay.
func (p ipPlan) vxlan(hi int) string {
	if p.v6 {
		return fmt.Sprintf("fd00:20::%x", hi+1)
	}
	return fmt.Sprintf("10.20.0.%d", hi+1)
}

// docker is address n of Docker's one subnet across hosts.
func (p ipPlan) docker(n int) string {
	if p.v6 {
		return fmt.Sprintf("fd00:1::%x", n)
	}
	return fmt.Sprintf("10.0.1.%d", n)
}

// flannel is address off of host hi's subnet (Flannel's 10.244.0.0/16
// leases a /24 per host; here fd00:244::/48 a /64).
func (p ipPlan) flannel(hi, off int) string {
	if p.v6 {
		return fmt.Sprintf("fd00:244:%x::%x", hi, off)
	}
	return fmt.Sprintf("10.244.%d.%d", hi, off)
}

// calico is address off of host hi's block (Calico's 192.168.0.0/16).
func (p ipPlan) calico(hi, off int) string {
	if p.v6 {
		return fmt.Sprintf("fd00:192:168:%x::%x", hi+1, off)
	}
	return fmt.Sprintf("192.168.%d.%d", hi+1, off)
}

// dockerMAC is Docker's container MAC: 02:42 followed by the IPv4 address
// (for IPv6, its last four bytes).
func dockerMAC(addr string) string {
	ip := net.ParseIP(addr)
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	b := ip[len(ip)-4:]
	return net.HardwareAddr{0x02, 0x42, b[0], b[1], b[2], b[3]}.String()
}
