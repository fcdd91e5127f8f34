package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/toolpath"
)

// tools are the programs Up runs, and the Debian package of each.
var tools = []struct{ cmd, pkg string }{
	{"ip", "iproute2"},
	{"bridge", "iproute2"},
	{"ethtool", "ethtool"},
}

// CheckSystem reports what keeps Up from working here: not root, or a tool
// missing.
func CheckSystem() error {
	if os.Geteuid() != 0 {
		return errors.New("building a testbed needs root (network namespaces)")
	}
	for _, t := range tools {
		if _, err := toolpath.Lookup(t.cmd); err != nil {
			if toolpath.Dir() != "" && !errors.Is(err, exec.ErrNotFound) {
				return err
			}
			return fmt.Errorf("%q not found in PATH: install the %s package (apt-get install %s)", t.cmd, t.pkg, t.pkg)
		}
	}
	return nil
}

// Up builds the testbed. Everything is checked before anything is made; on
// any later failure it removes what it made and returns the error.
func Up(ctx context.Context, s Spec) (*Testbed, error) {
	if err := Validate(s); err != nil {
		return nil, err
	}
	if _, err := slowdown(); err != nil {
		return nil, err
	}
	if err := CheckSystem(); err != nil {
		return nil, err
	}
	if err := CheckLayout(s.Layout); err != nil {
		return nil, err
	}
	if s.NetworkPolicy {
		if err := CheckNetpol(); err != nil {
			return nil, err
		}
	}
	if err := checkFree(s.Name); err != nil {
		return nil, err
	}
	t := plan(s)
	b := &builder{ctx: ctx, t: t}
	err := b.build()
	if err == nil {
		err = writeState(t)
	}
	if err != nil {
		// The daemons and their pods first: the CNI DEL needs the
		// namespaces.
		if derr := teardownDaemons(s.Name); derr != nil {
			err = errors.Join(err, derr)
		}
		for _, ns := range b.created {
			if rerr := removeNS(ns); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		os.Remove(statePath(s.Name))
		return nil, fmt.Errorf("testbed %s: %w", s.Name, err)
	}
	return t, nil
}

// checkFree fails when any namespace or state of that name exists.
func checkFree(name string) error {
	found, err := owned(name)
	if err != nil {
		return err
	}
	for _, p := range []string{statePath(name), daemonDir(name)} {
		if _, serr := os.Stat(p); serr == nil {
			found = append(found, p)
		}
	}
	if len(found) > 0 {
		what := strings.Join(found, ", ")
		if len(found) > 3 {
			what = fmt.Sprintf("%s and %d more", strings.Join(found[:3], ", "), len(found)-3)
		}
		return fmt.Errorf("testbed name %q is in use (%s): pick another name or run 'falcon-lab testbed down --name %s'",
			name, what, name)
	}
	return nil
}

type builder struct {
	ctx     context.Context
	t       *Testbed
	created []string // namespaces this Up made, for the rollback
}

func (b *builder) run(name string, args ...string) error {
	if err := b.ctx.Err(); err != nil {
		return err
	}
	out, err := exec.CommandContext(b.ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ip runs "ip -n ns args..."; each line of cmds is one command.
func (b *builder) ip(ns string, cmds ...string) error {
	for _, c := range cmds {
		if err := b.run("ip", append([]string{"-n", ns}, strings.Fields(c)...)...); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) fdb(ns, c string) error {
	return b.run("bridge", append([]string{"-n", ns}, strings.Fields(c)...)...)
}

// sysctl writes a value under /proc/sys as seen from namespace ns: the net
// sysctls belong to the namespace of the thread that opens them.
func (b *builder) sysctl(ns, key, value string) error {
	return netns.Do(ns, func() error {
		p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
		if err := os.WriteFile(p, []byte(value), 0); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, ns, err)
		}
		return nil
	})
}

func (b *builder) build() error {
	t := b.t
	nss := t.Namespaces()
	if runtimeContainers(t.Layout) {
		nss = nss[:2] // Docker or Kubernetes makes the containers' namespaces
	}
	for _, ns := range nss {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		// Not cancellable: a kill between creating the namespace and
		// returning would leave one this Up does not know it made.
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns add %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
		}
		b.created = append(b.created, ns)
		if err := b.initNS(ns); err != nil {
			return err
		}
	}
	if err := b.wire(); err != nil {
		return err
	}
	for hi := range t.Hosts {
		var err error
		switch t.Layout {
		case "vxlan":
			err = b.vxlan(hi)
		case "docker":
			err = b.docker(hi)
		case "flannel":
			err = b.flannel(hi)
		case "calico":
			err = b.calico(hi)
		}
		if err != nil {
			return err
		}
	}
	switch t.Layout {
	case "flannel-daemon":
		return b.flannelDaemon()
	case "docker-swarm":
		return b.dockerSwarm()
	case "k8s", "k8s-cilium":
		return b.k8s()
	}
	return nil
}

// initNS sets up a namespace the testbed just made: loopback up and, on an
// IPv6 testbed, the IPv6 defaults for the devices to come. Addresses skip
// duplicate address detection (a tentative address cannot send for a
// second; nothing else hands these out), hosts send no router
// solicitations, and multicast listener reports repeat within
// milliseconds of a join, not over seconds: messages sent from timers on
// another CPU would reach the wire during a run (see wire).
func (b *builder) initNS(ns string) error {
	if err := b.ip(ns, "link set lo up"); err != nil {
		return err
	}
	if !b.t.IPv6 {
		return nil
	}
	for _, kv := range [][2]string{
		{"accept_dad", "0"},
		{"router_solicitations", "0"},
		{"mldv1_unsolicited_report_interval", "1"},
		{"mldv2_unsolicited_report_interval", "1"},
	} {
		for _, dev := range []string{"all", "default"} {
			if err := b.sysctl(ns, "net.ipv6.conf."+dev+"."+kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireMTU is the wire's MTU: VXLAN over IPv6 takes 20 bytes more than over
// IPv4, and the overlays keep OverlayMTU.
func (b *builder) wireMTU() int {
	if b.t.IPv6 {
		return OverlayMTU + 70
	}
	return OverlayMTU + 50
}

// wire joins the hosts with a veth created directly in their namespaces.
func (b *builder) wire() error {
	h1, h2 := b.t.Hosts[0], b.t.Hosts[1]
	if err := b.ip(h1.Netns, fmt.Sprintf("link add %s type veth peer name %s netns %s", h1.NIC, h2.NIC, h2.Netns)); err != nil {
		return err
	}
	ips := b.t.ips()
	for hi, h := range b.t.Hosts {
		// Nothing but the test's traffic may cross the wire: a veth's NAPI
		// runs on the CPU of whoever sent into it last while idle, and an
		// ARP probe or an IPv6 neighbour message sent from a timer on
		// another CPU then polls a burst of the flows there, ahead of what
		// the first CPU still holds (seen as 15 packets a flow on the other
		// CPU at every stage, and as reordering without falcon). A real
		// NIC's poll runs where its interrupt is, so the wire gets fixed
		// MACs, permanent neighbour entries and no IPv6 (on an IPv6
		// testbed: no link-local address, so only the wire address's
		// multicast listener reports, sent as it is added; see initNS).
		if ips.v6 {
			if err := b.ip(h.Netns, fmt.Sprintf("link set %s addrgenmode none", h.NIC)); err != nil {
				return err
			}
		} else if err := b.sysctl(h.Netns, "net.ipv6.conf."+h.NIC+".disable_ipv6", "1"); err != nil {
			return err
		}
		p := b.peer(hi)
		cmds := []string{
			fmt.Sprintf("link set %s address %s mtu %d", h.NIC, nicMAC(b.t.Name, hi), b.wireMTU()),
			fmt.Sprintf("addr add %s/%d dev %s", h.Addr, ips.subnet, h.NIC),
			fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent", p.Addr, nicMAC(b.t.Name, 1-hi), h.NIC),
		}
		if ips.v6 && b.t.Layout == "flannel-daemon" {
			// Flannel runs dual stack over IPv6 (flannelConfig): its IPv4
			// overlay needs the IPv4 wire too.
			cmds = append(cmds, fmt.Sprintf("addr add %s/%d dev %s", plan4.wire(hi), plan4.subnet, h.NIC),
				fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent", plan4.wire(1-hi), nicMAC(b.t.Name, 1-hi), h.NIC))
		}
		if err := b.ip(h.Netns, append(cmds, fmt.Sprintf("link set %s up", h.NIC))...); err != nil {
			return err
		}
		// veth trusts partial checksums (CHECKSUM_PARTIAL) across the
		// wire; once XDP turns a packet into a frame and cpumap builds a new
		// skb from it, that trust is gone and the packets are dropped. A
		// real wire carries full checksums, so this one does too, in every
		// layout and mode, so that all modes compare the same work.
		// GRO on makes veth receive through NAPI with GRO, like a NIC
		// driver, instead of straight from the sender's xmit.
		// ethtool is the benchmark bundle's when it carries one.
		ethtool, err := toolpath.Lookup("ethtool")
		if err != nil {
			return err
		}
		if err := b.run("ip", "netns", "exec", h.Netns, ethtool, "-K", h.NIC, "tx", "off", "gro", "on"); err != nil {
			return err
		}
	}
	return nil
}

// peer returns the other host.
func (b *builder) peer(hi int) Host { return b.t.Hosts[1-hi] }
