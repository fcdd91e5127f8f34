package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// TestTestbedLayouts discovers the overlay of the receiving host of every
// testbed layout, the ones falcon-lab bench measures.
func TestTestbedLayouts(t *testing.T) {
	labtest.NeedTestbeds(t)
	for _, sub := range []string{"vxlan", "docker", "flannel", "calico", "flannel-daemon", "docker-swarm", "vxlan-ipv6", "docker-ipv6", "flannel-ipv6", "calico-ipv6", "flannel-daemon-ipv6"} {
		layout, v6 := strings.CutSuffix(sub, "-ipv6")
		t.Run(sub, func(t *testing.T) {
			name := fmt.Sprintf("d%d%s%s", os.Getpid(), layout[:2], layout[len(layout)-1:])
			if v6 {
				name += "6"
			}
			tb := labtest.Testbed(t, testbed.Spec{Name: name, Layout: layout, Containers: 2, IPv6: v6})
			h := tb.Hosts[1]
			o, err := Discover(h.Netns)
			if err != nil {
				t.Fatal(err)
			}
			ons := h.OverlayNS()
			wants := []want{{h.NIC, RoleNIC, h.Netns}, {h.Overlay, RoleOverlay, ons}}
			if h.Bridge != "" {
				wants = append(wants, want{h.Bridge, RoleBridge, ons})
			}
			for _, c := range h.Containers {
				wants = append(wants, want{c.HostVeth, RoleHostVeth, ons}, want{c.Dev, RoleContainer, c.Netns})
			}
			if layout == "docker-swarm" {
				wants = append(wants, swarmExtras(t, h.Sandbox)...)
			}
			if layout == "flannel-daemon" && v6 {
				// Flannel's dual stack: its IPv4 overlay beside the IPv6 one.
				wants = append(wants, want{"flannel.1", RoleOverlay, h.Netns})
			}
			check(t, o, wants)
			var vx *VXLAN
			for _, d := range o.Role(RoleOverlay) {
				if d.Netns == ons {
					vx = d.VXLAN
				}
			}
			if vx == nil || vx.Port != h.Port || vx.VNI != h.VNI {
				t.Fatalf("vxlan %+v, want port %d vni %d", vx, h.Port, h.VNI)
			}
			// Docker's vxlan0 has a local address only over IPv6.
			if (!strings.HasPrefix(layout, "docker") || v6) && vx.Local != h.Addr {
				t.Errorf("vxlan local %v, want the wire's %s", vx.Local, h.Addr)
			}
		})
	}
}

// swarmExtras are the devices a swarm node's Docker makes beside the
// containers' (sandbox: the overlay network's): the ingress network's
// overlay (vxlan0 on br0 in a sandbox of its own, and ingress_sbox's end),
// and the network's load balancer endpoint (veth0, and its lb_ sandbox's
// end).
func swarmExtras(t *testing.T, sandbox string) []want {
	dir := filepath.Dir(sandbox)
	ing, _ := filepath.Glob(filepath.Join(dir, "1-*"))
	lb, _ := filepath.Glob(filepath.Join(dir, "lb_*"))
	if len(ing) != 2 || len(lb) != 1 {
		t.Fatalf("%s: sandboxes 1-* %v and lb_* %v, want the ingress's and this network's, and one load balancer", dir, ing, lb)
	}
	if ing[0] == sandbox {
		ing[0] = ing[1]
	}
	return []want{{"vxlan0", RoleOverlay, ing[0]}, {"br0", RoleBridge, ing[0]}, {"veth0", RoleHostVeth, ing[0]},
		{"eth0", RoleContainer, filepath.Join(dir, "ingress_sbox")}, {"veth0", RoleHostVeth, sandbox}, {"eth0", RoleContainer, lb[0]}}
}
