package discover

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/netns"
)

// Select narrows o to the devices a user named (falcon's --devices): the
// VXLAN devices among names, and what hangs off them; a name that is no
// VXLAN device is taken as the NIC under all of them, which also settles a
// NIC that discovery could not tell. Without names o is returned as is.
func Select(o *Overlay, names []string) (*Overlay, error) {
	if len(names) == 0 {
		return o, nil
	}
	var vx, nics []string
	for _, n := range names {
		if slices.ContainsFunc(o.Devices, func(d Device) bool { return d.Name == n && d.Role == RoleOverlay }) {
			vx = append(vx, n)
		} else {
			nics = append(nics, n)
		}
	}
	if len(nics) > 1 {
		return nil, fmt.Errorf("--devices: %v are no VXLAN devices of the overlay, and only one NIC can be named", nics)
	}
	out := &Overlay{Netns: o.Netns}
	var nic *Device
	if len(nics) == 1 {
		d, err := namedNIC(o.Netns, nics[0])
		if err != nil {
			return nil, err
		}
		nic = &d
		out.Devices = append(out.Devices, d)
	}
	out.Devices = append(out.Devices, selectDevices(o, vx, nic)...)
	for _, w := range o.Warnings {
		if dev, ok := strings.CutPrefix(w, nicWarning); ok {
			dev, _, _ = strings.Cut(dev, ":") // device names never hold a colon
			if nic != nil || (len(vx) > 0 && !slices.Contains(vx, dev)) {
				continue
			}
		}
		out.Warnings = append(out.Warnings, w)
	}
	return out, nil
}

// namedNIC is the device --devices names as the overlay's NIC: a device
// of the host namespace that is no VXLAN device.
func namedNIC(ns, name string) (Device, error) {
	h, _, err := openHandle(ns)
	if err != nil {
		return Device{}, err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return Device{}, fmt.Errorf("--devices: %q is neither a VXLAN device of the overlay nor a device of the host namespace", name)
	}
	if _, ok := l.(*netlink.Vxlan); ok {
		return Device{}, fmt.Errorf("--devices: %q is a VXLAN device but not part of the overlay falcon found", name)
	}
	a := l.Attrs()
	return Device{Name: a.Name, Ifindex: a.Index, Netns: ns, Role: RoleNIC, Kind: l.Type(),
		MTU: a.MTU, RxQueues: a.NumRxQueues, Up: a.Flags&net.FlagUp != 0}, nil
}

// selectDevices keeps of o's devices the VXLAN devices vx (all when
// none), the containers and other devices of their namespaces, and the
// NICs they use: nic when one is named (the VXLAN devices then use it),
// else their own, first.
func selectDevices(o *Overlay, vx []string, nic *Device) []Device {
	keepNS := map[string]bool{}
	for _, d := range o.Devices {
		if d.Role == RoleOverlay && (len(vx) == 0 || slices.Contains(vx, d.Name)) {
			keepNS[d.Netns] = true
		}
	}
	var out []Device
	usedNIC := map[int]bool{}
	for _, d := range o.Devices {
		switch {
		case d.Role == RoleNIC:
			continue
		case d.Role == RoleOverlay:
			if !keepNS[d.Netns] || (len(vx) > 0 && !slices.Contains(vx, d.Name)) {
				continue
			}
			if nic != nil {
				v := *d.VXLAN
				v.NIC = nic.Ifindex
				d.VXLAN = &v
			}
			usedNIC[d.VXLAN.NIC] = true
		case d.Role == RoleContainer:
			if d.Peer == nil || !keepNS[d.Peer.Netns] {
				continue
			}
		case !keepNS[d.Netns]:
			continue
		}
		out = append(out, d)
	}
	if nic != nil {
		return out
	}
	var nicDevs []Device
	for _, d := range o.Devices {
		if d.Role == RoleNIC && usedNIC[d.Ifindex] {
			nicDevs = append(nicDevs, d)
		}
	}
	return append(nicDevs, out...)
}

// AddHostNICs adds the named devices of the host namespace to o as host
// NICs (RoleHostNIC), whose stage falcon's split takes for the host's own
// sockets, with or without an overlay beside them. A name must be a device
// of the namespace that is neither an overlay's device nor loopback: a NIC
// under a VXLAN device carries the overlay's packets, which its split takes
// already, decapsulating them.
func AddHostNICs(o *Overlay, names []string) (*Overlay, error) {
	if len(names) == 0 {
		return o, nil
	}
	h, _, err := openHandle(o.Netns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	out := &Overlay{Netns: o.Netns, Devices: slices.Clone(o.Devices), Warnings: o.Warnings}
	for _, n := range names {
		l, err := h.LinkByName(n)
		if err != nil {
			return nil, fmt.Errorf("--host-nics: no device %q in network namespace %s", n, netns.Label(o.Netns))
		}
		a := l.Attrs()
		if d, ok := o.Find(o.Netns, a.Index); ok {
			return nil, fmt.Errorf("--host-nics: %s is a device of the overlay (%s): --split alone splits what reaches it", n, d.Role)
		}
		if _, ok := l.(*netlink.Vxlan); ok {
			return nil, fmt.Errorf("--host-nics: %s is a VXLAN device, not a NIC", n)
		}
		if a.Flags&net.FlagLoopback != 0 {
			return nil, fmt.Errorf("--host-nics: %s is the loopback device, not a NIC", n)
		}
		out.Devices = append(out.Devices, Device{Name: a.Name, Ifindex: a.Index, Netns: o.Netns, Role: RoleHostNIC, Kind: l.Type(),
			MTU: a.MTU, RxQueues: a.NumRxQueues, Up: a.Flags&net.FlagUp != 0})
	}
	return out, nil
}
