// Package testbed builds two "hosts" (network namespaces) joined by a veth
// "wire", with the overlay networks of Docker, Flannel and Calico between
// containers (more namespaces) on them, so every measurement can be rerun on
// one machine. Nothing is ever created in the root namespace: removing a
// testbed's namespaces removes all of it.
package testbed

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Prefix starts the name of every namespace a testbed owns:
// fb-<name>-h1, fb-<name>-h2, fb-<name>-h2-c0 ...
const Prefix = "fb-"

// Layouts are the network layouts Up can build.
var Layouts = []string{"host", "vxlan", "docker", "flannel", "calico", "flannel-daemon", "docker-swarm", "k8s", "k8s-cilium"}

const (
	// MaxName keeps namespace names (name + "-h2-c31" + prefix) short.
	MaxName = 32
	// MaxContainers per host; the address plans below leave room for it:
	// the papers' busiest figures ran up to 80 containers or pairs
	// (HotCloud '19 Figs. 3 and 5, FALCON Fig. 14).
	MaxContainers = 80
)

// Spec says what to build.
type Spec struct {
	Name       string
	Layout     string
	Containers int // per host; 0 means 1; ignored by host and vxlan
	// IPv6: the wire, the overlays and the containers use IPv6 only.
	IPv6 bool
	// NetworkPolicy (k8s only): kube-network-policies enforces the
	// cluster's NetworkPolicies on each node (k8snetpol.go).
	NetworkPolicy bool
}

// Testbed describes a built testbed; it is also the state file and the
// JSON that scripts read.
type Testbed struct {
	Name   string `json:"name"`
	Layout string `json:"layout"`
	IPv6   bool   `json:"ipv6,omitempty"`
	// NetworkPolicy: the k8s layout runs kube-network-policies.
	NetworkPolicy bool `json:"network_policy,omitempty"`
	// Kubeconfig is the k8s layout's administrator kubeconfig (its API
	// server is reached from the hosts' namespaces).
	Kubeconfig string  `json:"kubeconfig,omitempty"`
	Hosts      [2]Host `json:"hosts"` // [0] h1: client/sender side, [1] h2: server/receiver side
	// Problems is set by List for a testbed that is not whole (a namespace
	// gone, no state file); such a testbed can only be taken down.
	Problems []string `json:"problems,omitempty"`
}

// Host is one host namespace.
type Host struct {
	Name        string `json:"name"`                   // "h1" / "h2"
	Netns       string `json:"netns"`                  // fb-<name>-h1
	NIC         string `json:"nic"`                    // the wire end in this host
	Addr        string `json:"addr"`                   // underlay address on the wire
	Overlay     string `json:"overlay,omitempty"`      // VXLAN device
	OverlayAddr string `json:"overlay_addr,omitempty"` // the host's own address on the overlay, if any
	VNI         int    `json:"vni,omitempty"`
	Port        int    `json:"port,omitempty"`   // VXLAN UDP port
	Bridge      string `json:"bridge,omitempty"` // br0 / cni0
	// Sandbox is the namespace that holds Overlay, Bridge and the host
	// veths where it is not the host's own: Docker's overlay driver keeps
	// them in a sandbox of the network's (docker-swarm: a path under the
	// daemon's exec root). Its UDP socket, and so the underlay, stay here.
	Sandbox    string      `json:"sandbox,omitempty"`
	Containers []Container `json:"containers,omitempty"`
	// NextContainer numbers the next container AddContainer makes, when
	// above every container's own number (names are never reused).
	NextContainer int `json:"next_container,omitempty"`
}

// Container is one container namespace attached to its host by a veth.
type Container struct {
	Name     string `json:"name"`      // c0, c1 ...
	Netns    string `json:"netns"`     // fb-<name>-h2-c0
	Dev      string `json:"dev"`       // eth0
	Addr     string `json:"addr"`      // container address
	HostVeth string `json:"host_veth"` // its peer in the host namespace
}

// Endpoint is where an application runs: a namespace and the address it
// uses.
//
// Dev is the device Addr is on: the last a packet to the endpoint crosses.
type Endpoint struct{ Netns, Addr, Dev string }

// Endpoints returns where clients (on h1) and servers (on h2) run; the i-th
// client pairs with the i-th server. host: the host namespaces and their
// wire addresses; vxlan: the host namespaces and their overlay addresses;
// container layouts: one endpoint per container.
func (t *Testbed) Endpoints() (clients, servers []Endpoint) {
	side := func(h Host) []Endpoint {
		switch t.Layout {
		case "host":
			return []Endpoint{{h.Netns, h.Addr, h.NIC}}
		case "vxlan":
			return []Endpoint{{h.Netns, h.OverlayAddr, h.Overlay}}
		}
		var eps []Endpoint
		for _, c := range h.Containers {
			eps = append(eps, Endpoint{c.Netns, c.Addr, c.Dev})
		}
		return eps
	}
	return side(t.Hosts[0]), side(t.Hosts[1])
}

// Namespaces lists every namespace of the testbed, hosts first.
func (t *Testbed) Namespaces() []string {
	ns := []string{t.Hosts[0].Netns, t.Hosts[1].Netns}
	for _, h := range t.Hosts {
		for _, c := range h.Containers {
			ns = append(ns, c.Netns)
		}
	}
	return ns
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// A name segment like h1 or c0 would make namespace names ambiguous
	// (fb-a-h1-h2: testbed "a-h1"? or ...), so names may not contain one.
	reservedSeg = regexp.MustCompile(`^[hc][0-9]+$`)
	// nsRE splits a namespace name; the greedy name group plus the rule
	// above make the split unique.
	nsRE = regexp.MustCompile(`^` + Prefix + `(.+)-(h[12])(?:-(c[0-9]+))?$`)
)

// ValidateName checks a testbed name without touching the system.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("testbed name is empty")
	}
	if len(name) > MaxName {
		return fmt.Errorf("testbed name %q is too long (%d characters, at most %d)", name, len(name), MaxName)
	}
	if !nameRE.MatchString(name) {
		return fmt.Errorf("testbed name %q: use lower-case letters, digits and single inner dashes", name)
	}
	for _, seg := range strings.Split(name, "-") {
		if reservedSeg.MatchString(seg) {
			return fmt.Errorf("testbed name %q: a part like %q is reserved for host and container namespaces", name, seg)
		}
	}
	return nil
}

// Validate checks a spec without touching the system.
func Validate(s Spec) error {
	if err := ValidateName(s.Name); err != nil {
		return err
	}
	if !slices.Contains(Layouts, s.Layout) {
		return fmt.Errorf("unknown layout %q (one of %s)", s.Layout, strings.Join(Layouts, ", "))
	}
	if s.Containers < 0 || s.Containers > MaxContainers {
		return fmt.Errorf("containers per host must be 1..%d, not %d", MaxContainers, s.Containers)
	}
	if s.NetworkPolicy && s.Layout != "k8s" {
		return fmt.Errorf("--netpol is for layout k8s (a NetworkPolicy engine needs a cluster), not %s", s.Layout)
	}
	if s.IPv6 {
		return CheckIPv6(s.Layout)
	}
	return nil
}

// CheckIPv6 says whether a layout can be built over IPv6 (--ipv6).
func CheckIPv6(layout string) error {
	switch layout {
	case "docker-swarm", "k8s", "k8s-cilium":
		return fmt.Errorf("--ipv6 is not built for layout %s (it runs over IPv4): use host, vxlan, docker, flannel, calico or flannel-daemon", layout)
	}
	return nil
}

// runtimeContainers reports whether a layout's container runtime, not Up,
// makes its containers' namespaces.
func runtimeContainers(layout string) bool {
	return layout == "docker-swarm" || layout == "k8s" || layout == "k8s-cilium"
}

// OverlayNS is the namespace of h's Overlay, Bridge and host veths.
func (h Host) OverlayNS() string {
	if h.Sandbox != "" {
		return h.Sandbox
	}
	return h.Netns
}

// hostNS and containerNS name the namespaces of testbed name.
func hostNS(name, host string) string { return Prefix + name + "-" + host }
func containerNS(name, host string, i int) string {
	return fmt.Sprintf("%s-c%d", hostNS(name, host), i)
}

// parseNS splits a namespace name into testbed, host and container ("" for
// a host namespace); ok is false for namespaces that are not a testbed's.
func parseNS(ns string) (name, host, container string, ok bool) {
	m := nsRE.FindStringSubmatch(ns)
	if m == nil || ValidateName(m[1]) != nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}
