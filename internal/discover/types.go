// Package discover finds the devices of a host's container overlay — the
// NIC, the VXLAN devices, the bridges, the host-side veths and the
// containers' ends of them — from what the kernel reports over netlink,
// never from device names, so Docker overlay, Flannel, Calico VXLAN and a
// plain VXLAN device are all found the same way.
package discover

import (
	"fmt"

	"github.com/falconnet/falcon/internal/netns"
)

// Role is what a device does on the overlay's receive path.
type Role string

const (
	RoleNIC       Role = "nic"       // the VXLAN device's underlay: packets arrive here
	RoleOverlay   Role = "overlay"   // a VXLAN device: decapsulates
	RoleBridge    Role = "bridge"    // a bridge with a VXLAN port (Docker, Flannel)
	RoleHostVeth  Role = "host-veth" // host side of a container's veth (bridged or routed)
	RoleContainer Role = "container" // the container's end of that veth
	// RoleHostNIC is a NIC of the host network itself whose own sockets
	// receive, no overlay on it (FALCON's Host+); never found, only named
	// (AddHostNICs).
	RoleHostNIC Role = "host-nic"
)

// VXLAN describes a VXLAN device.
type VXLAN struct {
	VNI    int    `json:"vni"`
	Port   int    `json:"port"`
	Local  string `json:"local,omitempty"`
	Remote string `json:"remote,omitempty"` // unicast remote or multicast group
	// NIC is the ifindex of the underlay device in NICNetns; 0 if unknown.
	NIC int `json:"nic,omitempty"`
	// FlowBased ("external", as Cilium and some Calico setups use) devices
	// take their VNI and remote from per-packet metadata.
	FlowBased bool `json:"flow_based,omitempty"`
}

// Peer is the other end of a veth.
type Peer struct {
	Netns   string `json:"netns"`
	Ifindex int    `json:"ifindex"`
	Name    string `json:"name,omitempty"`
}

// Device is one network device of the overlay.
type Device struct {
	Name    string `json:"name"`
	Ifindex int    `json:"ifindex"`
	// Netns is the device's namespace as internal/netns takes it: the host
	// namespace as given to Discover ("" = the current one), a name under
	// /run/netns, or a path such as /proc/PID/ns/net.
	Netns    string `json:"netns"`
	Role     Role   `json:"role"`
	Kind     string `json:"kind"`
	MTU      int    `json:"mtu"`
	RxQueues int    `json:"rx_queues"`
	Up       bool   `json:"up"`
	Master   string `json:"master,omitempty"`
	VXLAN    *VXLAN `json:"vxlan,omitempty"`
	Peer     *Peer  `json:"peer,omitempty"`
}

func (d Device) String() string {
	return fmt.Sprintf("%s (%s, ifindex %d, netns %s)", d.Name, d.Role, d.Ifindex, netns.Label(d.Netns))
}

// Key identifies a device across namespaces.
func (d Device) Key() string { return fmt.Sprintf("%s/%d", d.Netns, d.Ifindex) }

// Overlay is what Discover found.
type Overlay struct {
	Netns   string   `json:"netns"`
	Devices []Device `json:"devices"`
	// Warnings are things found that could not be fully understood, e.g. a
	// veth whose peer's namespace has no path falcon can open.
	Warnings []string `json:"warnings,omitempty"`
}

// Role returns the devices with role r, in discovery order.
func (o *Overlay) Role(r Role) []Device {
	var out []Device
	for _, d := range o.Devices {
		if d.Role == r {
			out = append(out, d)
		}
	}
	return out
}

// Find returns the device of namespace ns with ifindex idx.
func (o *Overlay) Find(ns string, idx int) (Device, bool) {
	for _, d := range o.Devices {
		if d.Netns == ns && d.Ifindex == idx {
			return d, true
		}
	}
	return Device{}, false
}
