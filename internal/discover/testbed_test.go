package discover

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/testbed"
)

// TestTestbedLayouts discovers the overlay of the receiving host of every
// testbed layout, the ones falcon bench measures.
func TestTestbedLayouts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if err := testbed.CheckSystem(); err != nil {
		t.Skip(err)
	}
	for _, sub := range []string{"vxlan", "docker", "flannel", "calico", "flannel-daemon", "vxlan-ipv6", "docker-ipv6", "flannel-ipv6", "calico-ipv6"} {
		layout, v6 := strings.CutSuffix(sub, "-ipv6")
		t.Run(sub, func(t *testing.T) {
			if err := testbed.CheckLayout(layout); err != nil {
				t.Skip(err)
			}
			name := fmt.Sprintf("d%d%s%s", os.Getpid(), layout[:2], layout[len(layout)-1:])
			if v6 {
				name += "6"
			}
			t.Cleanup(func() { testbed.Down(name) })
			tb, err := testbed.Up(context.Background(), testbed.Spec{Name: name, Layout: layout, Containers: 2, IPv6: v6})
			if err != nil {
				t.Fatal(err)
			}
			h := tb.Hosts[1]
			o, err := Discover(h.Netns)
			if err != nil {
				t.Fatal(err)
			}
			wants := []want{{h.NIC, RoleNIC, h.Netns}, {h.Overlay, RoleOverlay, h.Netns}}
			if h.Bridge != "" {
				wants = append(wants, want{h.Bridge, RoleBridge, h.Netns})
			}
			for _, c := range h.Containers {
				wants = append(wants, want{c.HostVeth, RoleHostVeth, h.Netns}, want{c.Dev, RoleContainer, c.Netns})
			}
			check(t, o, wants)
			vx := o.Role(RoleOverlay)[0].VXLAN
			if vx.Port != h.Port || vx.VNI != h.VNI {
				t.Errorf("vxlan %+v, want port %d vni %d", vx, h.Port, h.VNI)
			}
			// Docker's vxlan0 has a local address only over IPv6.
			if (layout != "docker" || v6) && vx.Local != h.Addr {
				t.Errorf("vxlan local %v, want the wire's %s", vx.Local, h.Addr)
			}
		})
	}
}
