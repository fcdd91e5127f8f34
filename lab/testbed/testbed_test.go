package testbed

import (
	"net"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", MaxName+1)
	for _, c := range []struct {
		s    Spec
		want string // "" = valid
	}{
		{Spec{Name: "demo", Layout: "docker"}, ""},
		{Spec{Name: "a-1-b", Layout: "calico", Containers: MaxContainers}, ""},
		{Spec{Name: "x", Layout: "host", Containers: 1}, ""},
		{Spec{Name: "", Layout: "host"}, "empty"},
		{Spec{Name: long, Layout: "host"}, "too long"},
		{Spec{Name: "Demo", Layout: "host"}, "lower-case"},
		{Spec{Name: "a_b", Layout: "host"}, "lower-case"},
		{Spec{Name: "-a", Layout: "host"}, "lower-case"},
		{Spec{Name: "a--b", Layout: "host"}, "lower-case"},
		{Spec{Name: "a/b", Layout: "host"}, "lower-case"},
		{Spec{Name: "a-h1", Layout: "host"}, "reserved"},
		{Spec{Name: "c0-x", Layout: "host"}, "reserved"},
		{Spec{Name: "demo", Layout: "weave"}, "unknown layout"},
		{Spec{Name: "demo", Layout: ""}, "unknown layout"},
		{Spec{Name: "demo", Layout: "docker", Containers: -1}, "containers"},
		{Spec{Name: "demo", Layout: "docker", Containers: MaxContainers + 1}, "containers"},
		{Spec{Name: "demo", Layout: "calico", IPv6: true}, ""},
		{Spec{Name: "demo", Layout: "docker-swarm", IPv6: true}, "not built for layout docker-swarm"},
		{Spec{Name: "demo", Layout: "k8s", IPv6: true}, "not built for layout k8s"},
		{Spec{Name: "demo", Layout: "k8s", NetworkPolicy: true}, ""},
		{Spec{Name: "demo", Layout: "calico", NetworkPolicy: true}, "--netpol is for layout k8s"},
		{Spec{Name: "demo", Layout: "k8s-cilium", IPv6: true}, "not built for layout k8s-cilium"},
	} {
		err := Validate(c.s)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want ok", c.s, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Validate(%+v) = %v, want error about %q", c.s, err, c.want)
		}
	}
}

func TestParseNS(t *testing.T) {
	for _, name := range []string{"a", "demo", "a-b", "hh-1", "x-h", "t123-docker"} {
		for _, h := range hostNames {
			if n, host, c, ok := parseNS(hostNS(name, h)); !ok || n != name || host != h || c != "" {
				t.Errorf("parseNS(%q) = %q %q %q %v", hostNS(name, h), n, host, c, ok)
			}
			if n, host, c, ok := parseNS(containerNS(name, h, 12)); !ok || n != name || host != h || c != "c12" {
				t.Errorf("parseNS(%q) = %q %q %q %v", containerNS(name, h, 12), n, host, c, ok)
			}
		}
	}
	for _, ns := range []string{"fb-", "fb-a", "fb-a-h3", "fb-a-h1-x", "fb--h1", "fb-A-h1", "xfb-a-h1", "fct123"} {
		if n, _, _, ok := parseNS(ns); ok {
			t.Errorf("parseNS(%q) took it for testbed %q", ns, n)
		}
	}
}

func TestPlan(t *testing.T) {
	for _, layout := range Layouts {
		for _, v6 := range []bool{false, true} {
			if v6 && CheckIPv6(layout) != nil {
				continue
			}
			planOne(t, Spec{Name: "demo", Layout: layout, Containers: MaxContainers, IPv6: v6})
		}
	}
	// Names look like the real ones and change with the testbed.
	for layout, want := range map[string]string{"docker": `^veth[0-9a-f]{7}$`, "flannel": `^veth[0-9a-f]{8}$`, "calico": `^cali[0-9a-f]{11}$`} {
		a := plan(Spec{Name: "a", Layout: layout}).Hosts[1].Containers[0].HostVeth
		b := plan(Spec{Name: "b", Layout: layout}).Hosts[1].Containers[0].HostVeth
		if !regexp.MustCompile(want).MatchString(a) || a == b {
			t.Errorf("%s: host veth %q (other testbed %q), want %s and different", layout, a, b, want)
		}
	}
	if a, b := vtepMAC("demo", 0), vtepMAC("demo", 1); a == b {
		t.Errorf("both VTEPs have MAC %s", a)
	}
	if mac, _ := net.ParseMAC(vtepMAC("demo", 0)); mac[0]&1 != 0 || mac[0]&2 == 0 {
		t.Errorf("VTEP MAC %s is not unicast and locally administered", mac)
	}
}

// planOne checks one spec's plan: deterministic, names as the real systems
// make them, every address private, of the spec's IP version, and unique.
func planOne(t *testing.T, s Spec) {
	t.Helper()
	tb, layout := plan(s), s.Layout
	if s.IPv6 {
		layout += " (IPv6)"
	}
	if !reflect.DeepEqual(tb, plan(s)) {
		t.Errorf("%s: plan is not deterministic", layout)
	}
	addrs := map[string]bool{}
	for hi, h := range tb.Hosts {
		if h.Netns != "fb-demo-"+hostNames[hi] || h.NIC != "eth0" {
			t.Errorf("%s: host %d named %q nic %q", layout, hi, h.Netns, h.NIC)
		}
		hasC := s.Layout != "host" && s.Layout != "vxlan"
		if hasC != (len(h.Containers) == MaxContainers) {
			t.Errorf("%s: %d containers on %s", layout, len(h.Containers), h.Name)
		}
		for _, a := range []string{h.Addr, h.OverlayAddr} {
			if a != "" && (addrs[a] || !private(a, s.IPv6)) {
				t.Errorf("%s: address %q reused or not private", layout, a)
			}
			addrs[a] = true
		}
		veths := map[string]bool{}
		for _, c := range h.Containers {
			if s.Layout == "flannel-daemon" || runtimeContainers(s.Layout) {
				continue // addresses and veth names are the plugins' or Docker's choice, at up
			}
			if addrs[c.Addr] || !private(c.Addr, s.IPv6) {
				t.Errorf("%s: container address %q reused or not private", layout, c.Addr)
			}
			addrs[c.Addr] = true
			if len(c.HostVeth) > 15 || veths[c.HostVeth] {
				t.Errorf("%s: host veth %q too long for a device name or reused", layout, c.HostVeth)
			}
			veths[c.HostVeth] = true
		}
	}
}

// private: a valid private address of the IP version asked for.
func private(a string, v6 bool) bool {
	ip := net.ParseIP(a)
	return ip != nil && ip.IsPrivate() && (ip.To4() == nil) == v6
}

func TestEndpoints(t *testing.T) {
	for _, c := range []struct {
		layout           string
		client, server   []Endpoint
		containersIgnore bool
	}{
		{"host", []Endpoint{{"fb-e-h1", "10.10.0.1", ""}}, []Endpoint{{"fb-e-h2", "10.10.0.2", ""}}, true},
		{"vxlan", []Endpoint{{"fb-e-h1", "10.20.0.1", ""}}, []Endpoint{{"fb-e-h2", "10.20.0.2", ""}}, true},
		{"docker", []Endpoint{{"fb-e-h1-c0", "10.0.1.2", ""}, {"fb-e-h1-c1", "10.0.1.3", ""}},
			[]Endpoint{{"fb-e-h2-c0", "10.0.1.102", ""}, {"fb-e-h2-c1", "10.0.1.103", ""}}, false},
		{"flannel", []Endpoint{{"fb-e-h1-c0", "10.244.0.2", ""}, {"fb-e-h1-c1", "10.244.0.3", ""}},
			[]Endpoint{{"fb-e-h2-c0", "10.244.1.2", ""}, {"fb-e-h2-c1", "10.244.1.3", ""}}, false},
		{"calico", []Endpoint{{"fb-e-h1-c0", "192.168.1.1", ""}, {"fb-e-h1-c1", "192.168.1.2", ""}},
			[]Endpoint{{"fb-e-h2-c0", "192.168.2.1", ""}, {"fb-e-h2-c1", "192.168.2.2", ""}}, false},
	} {
		tb := plan(Spec{Name: "e", Layout: c.layout, Containers: 2})
		cl, sv := tb.Endpoints()
		// The device each address is on.
		for i, h := range tb.Hosts {
			want := map[string]string{"host": h.NIC, "vxlan": h.Overlay}[c.layout]
			for j, e := range [][]Endpoint{cl, sv}[i] {
				if want == "" {
					want = h.Containers[j].Dev
				}
				if e.Dev == "" || e.Dev != want {
					t.Errorf("%s: endpoint %v: device %q, want %q", c.layout, e, e.Dev, want)
				}
				[][]Endpoint{cl, sv}[i][j].Dev = ""
			}
		}
		if !reflect.DeepEqual(cl, c.client) || !reflect.DeepEqual(sv, c.server) {
			t.Errorf("%s: Endpoints() = %v, %v; want %v, %v", c.layout, cl, sv, c.client, c.server)
		}
		if c.containersIgnore && len(tb.Namespaces()) != 2 {
			t.Errorf("%s: namespaces %v, want only the hosts", c.layout, tb.Namespaces())
		}
	}
	// Containers default to one per host.
	if cl, _ := plan(Spec{Name: "e", Layout: "docker"}).Endpoints(); len(cl) != 1 {
		t.Errorf("default containers: %d clients, want 1", len(cl))
	}
}
