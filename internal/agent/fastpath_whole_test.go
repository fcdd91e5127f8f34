package agent

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/labtest"
)

// TestWholeOf reads, with the real tools' settings in a scratch namespace,
// which TCP aggregates a container takes whole: any where it forwards on
// no device; where it forwards (as every container of a host that
// forwards does: a namespace starts with the host's settings), those to
// its own addresses, unless something may rewrite a destination before
// routing.
func TestWholeOf(t *testing.T) {
	labtest.NeedRoot(t)
	for _, tool := range []string{"nft", "iptables-legacy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatal(err)
		}
	}
	// d1 is down, and the kernel still delivers its address locally: it
	// keeps the local route.
	own := []netip.Addr{netip.MustParseAddr("10.77.0.5"), netip.MustParseAddr("10.78.0.5")}
	const base = "set -e; ip link set lo up; ip link add d0 type veth peer name d0p; ip addr add 10.77.0.5/24 dev d0; " +
		"ip link set d0p up; ip link set d0 up; " +
		"ip link add d1 type veth peer name d1p; ip addr add 10.78.0.5/24 dev d1; " +
		"sysctl -qw net.ipv4.conf.all.forwarding=0; "
	const fwd = "sysctl -qw net.ipv4.conf.all.forwarding=1; "
	for _, c := range []struct {
		name, setup string
		want        datapath.Whole
		why         string // part of why it takes none
	}{
		{"forwards-nowhere", "", datapath.Whole{Any: true}, ""},
		{"forwards", fwd, datapath.Whole{Addrs: own}, ""},
		{"forwards-on-one-device", "sysctl -qw net.ipv4.conf.d0.forwarding=1", datapath.Whole{Addrs: own}, ""},
		{"nat-before-routing", fwd + "nft add table ip t; nft add chain ip t pre '{ type nat hook prerouting priority -100; }'", datapath.Whole{}, "nftables chain ip t pre"},
		{"filter-before-routing", fwd + "nft add table ip t; nft add chain ip t f '{ type filter hook prerouting priority 0; }'", datapath.Whole{}, "nftables chain ip t f"},
		{"inet-ingress", fwd + "nft add table inet t; nft add chain inet t in '{ type filter hook ingress device d0 priority 0; }'", datapath.Whole{}, "nftables chain inet t in"},
		{"legacy-nat", fwd + "iptables-legacy -t nat -L -n >/dev/null", datapath.Whole{}, "legacy iptables nat table"},
		{"nat-after-routing", fwd + "nft add table ip t; nft add chain ip t out '{ type nat hook output priority -100; }'; " +
			"nft add chain ip t post '{ type nat hook postrouting priority 100; }'",
			datapath.Whole{Addrs: own}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := scratchNetns(t)
			nsSh(t, ns, base)
			// Opened before the change: what the reader holds sees later ones.
			var f fastPath
			defer f.closeReaders(nil)
			f.readWhole(ns, legacyLoaded())
			nsSh(t, ns, c.setup)
			got, why := f.readWhole(ns, legacyLoaded())
			if !sameWhole(got, c.want) {
				t.Errorf("got %+v (%s), want %+v", got, why, c.want)
			}
			if got.None() != (why != "") || !strings.Contains(why, c.why) {
				t.Errorf("takes none: %v, why %q, want it to say %q", got.None(), why, c.why)
			}
		})
	}
	var f fastPath
	if got, why := f.readWhole("fct-no-such-netns", legacyLoaded()); !got.None() || why == "" {
		t.Errorf("a namespace that is not there: got %+v (%q), want none, and why", got, why)
	}
}

// TestLegacyAppeared reads legacy tables in the namespace asked for, not
// in the agent's main thread's (which /proc/net would show).
func TestLegacyAppeared(t *testing.T) {
	labtest.NeedRoot(t)
	if _, err := exec.LookPath("iptables-legacy"); err != nil {
		t.Fatal(err)
	}
	ns := scratchNetns(t)
	if legacyAppeared(ns) {
		t.Fatal("a new namespace has legacy tables")
	}
	nsSh(t, ns, "iptables-legacy -t filter -L -n >/dev/null")
	if !legacyAppeared(ns) {
		t.Error("the filter table iptables-legacy made is not seen")
	}
	if got, err := legacyTables(ns); err != nil || got != "filter" {
		t.Errorf("legacyTables: %q, %v; want filter", got, err)
	}
}

// TestWholeReaderLetsNamespaceGo: what a reader holds keeps its namespace
// alive, so the next read after the namespace's name goes must let it go
// (its veth, which dies with it, goes from the host).
func TestWholeReaderLetsNamespaceGo(t *testing.T) {
	labtest.NeedRoot(t)
	ns, veth := fmt.Sprintf("fct-whole-%d", os.Getpid()), fmt.Sprintf("fctw%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("ip", "link", "del", veth).Run()
	})
	if out, err := exec.Command("ip", "link", "add", veth, "type", "veth", "peer", "name", "c0", "netns", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	var f fastPath
	defer f.closeReaders(nil)
	if _, why := f.readWhole(ns, legacyLoaded()); why != "" || f.readers[ns] == nil {
		t.Fatalf("no reader of a live namespace: %q", why)
	}
	exec.Command("ip", "netns", "del", ns).Run()
	present := func() bool { return exec.Command("ip", "link", "show", veth).Run() == nil }
	time.Sleep(500 * time.Millisecond)
	if !present() {
		t.Fatal("the namespace went while its reader was open: the test shows nothing")
	}
	if _, why := f.readWhole(ns, legacyLoaded()); why == "" || f.readers[ns] != nil {
		t.Errorf("a namespace without its name: reader kept, why %q", why)
	}
	for end := time.Now().Add(5 * time.Second); present(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the namespace is still alive 5 s after its reader was dropped")
		}
	}
}
