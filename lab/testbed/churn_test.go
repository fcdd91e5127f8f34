package testbed

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestAddRemoveContainer adds containers to a running testbed of each
// container layout and removes them: an added one carries traffic from the
// other host, a removed one leaves no namespace, host end or (docker) entry
// on the other host behind, names are never reused and addresses are
// (flannel-daemon: the CNI plugins add and delete them).
func TestAddRemoveContainer(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip(err)
	}
	for _, sub := range []string{"docker", "flannel", "calico", "flannel-daemon", "docker-ipv6", "calico-ipv6"} {
		layout, v6 := strings.CutSuffix(sub, "-ipv6")
		t.Run(sub, func(t *testing.T) {
			needDaemons(t, layout)
			name := tbName("ch" + layout[:3] + layout[len(layout)-1:])
			if v6 {
				name += "6"
			}
			tb := up(t, Spec{Name: name, Layout: layout, Containers: 1, IPv6: v6})
			size := 1450 - 28
			if v6 {
				size = 1450 - 48
			}
			ctx := context.Background()
			client := tb.Hosts[0].Containers[0]
			c1, err := AddContainer(ctx, name, 1)
			if err != nil {
				t.Fatal(err)
			}
			if c1.Name != "c1" || c1.Addr == tb.Hosts[1].Containers[0].Addr {
				t.Errorf("added %+v next to %+v", c1, tb.Hosts[1].Containers[0])
			}
			ping(t, Endpoint{client.Netns, client.Addr, client.Dev}, Endpoint{c1.Netns, c1.Addr, c1.Dev}, size)
			got, err := Get(name)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(got.Hosts[1].Containers); n != 2 || got.Hosts[1].Containers[1] != c1 {
				t.Fatalf("state after add: %+v", got.Hosts[1].Containers)
			}

			if err := RemoveContainer(name, 1, c1.Name); err != nil {
				t.Fatal(err)
			}
			if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), c1.Netns) {
				t.Errorf("namespace %s left", c1.Netns)
			}
			if out, _ := exec.Command("ip", "-n", tb.Hosts[1].Netns, "link", "show", c1.HostVeth).CombinedOutput(); !strings.Contains(string(out), "not exist") {
				t.Errorf("host end %s left: %s", c1.HostVeth, out)
			}
			if layout == "docker" {
				if out, _ := exec.Command("ip", "-n", tb.Hosts[0].Netns, "neigh", "show", c1.Addr).Output(); strings.TrimSpace(string(out)) != "" {
					t.Errorf("h1 still has a neighbour entry for %s: %s", c1.Addr, out)
				}
			}
			if got, err = Get(name); err != nil || len(got.Hosts[1].Containers) != 1 {
				t.Fatalf("state after remove: %+v %v", got, err)
			}

			c2, err := AddContainer(ctx, name, 1)
			if err != nil {
				t.Fatal(err)
			}
			// host-local hands out addresses round-robin, not the freed one first.
			freed := layout == "flannel-daemon" || c2.Addr == c1.Addr
			if c2.Name != "c2" || !freed || c2.HostVeth == c1.HostVeth {
				t.Errorf("added %+v after removing %+v: want a fresh name and the freed address", c2, c1)
			}
			ping(t, Endpoint{client.Netns, client.Addr, client.Dev}, Endpoint{c2.Netns, c2.Addr, c2.Dev}, 64)
			if err := RemoveContainer(name, 1, "c1"); err == nil {
				t.Error("removed c1 twice")
			}
			if err := Down(name); err != nil {
				t.Fatal(err)
			}
			assertGone(t, name)
		})
	}
}
