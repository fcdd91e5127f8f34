package agent

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// What wholeOf reads inside a container's namespace (the calling thread's).

const (
	nlaTypeMask   = 0x3fff // NLA_TYPE_MASK: an attribute's type without its nested and byte-order flags
	nfInetIngress = 5      // NF_INET_INGRESS, the inet family's ingress hook (Linux 5.10)
)

// forwardsAnywhere says whether the namespace forwards IPv4 on any device
// ("all" included; "default" only seeds devices yet to come).
func forwardsAnywhere() (bool, error) {
	paths, err := filepath.Glob("/proc/sys/net/ipv4/conf/*/forwarding")
	if err != nil || len(paths) == 0 {
		return true, err
	}
	for _, p := range paths {
		if filepath.Base(filepath.Dir(p)) == "default" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			if os.IsNotExist(err) { // a device gone meanwhile
				continue
			}
			return true, err
		}
		if strings.TrimSpace(string(b)) != "0" {
			return true, nil
		}
	}
	return false, nil
}

// destNAT names what in the namespace may rewrite an incoming packet's
// destination before routing, if anything: the legacy nat table, or an
// nftables base chain at prerouting or ingress of a family that sees IPv4
// (ip, inet, netdev, bridge), whatever its type and rules (a filter
// chain's rule can set the destination too). Docker's embedded DNS adds
// nat chains at output and postrouting only, which pass.
func destNAT() (string, error) {
	if b, err := os.ReadFile("/proc/thread-self/net/ip_tables_names"); err == nil {
		for _, t := range strings.Fields(string(b)) {
			if t == "nat" {
				return "the legacy iptables nat table", nil
			}
		}
	}
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETCHAIN, unix.NLM_F_DUMP)
	req.AddRawData([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}) // struct nfgenmsg
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if err != nil {
		return "", err
	}
	for _, m := range msgs {
		if len(m) >= 4 {
			if name := beforeRouting(m[0], m[4:]); name != "" {
				return "nftables chain " + name, nil
			}
		}
	}
	return "", nil
}

// beforeRouting names a chain of family (an NFT_MSG_NEWCHAIN's
// attributes) if it is a base chain at prerouting or ingress of a family
// that sees IPv4: "family table chain", or "?" where it cannot be parsed.
func beforeRouting(family byte, attrs []byte) string {
	as, err := nl.ParseRouteAttr(attrs)
	if err != nil {
		return "?"
	}
	var table, chain string
	hooked := false
	for _, a := range as {
		switch a.Attr.Type & nlaTypeMask {
		case unix.NFTA_CHAIN_TABLE:
			table = nl.BytesToString(a.Value)
		case unix.NFTA_CHAIN_NAME:
			chain = nl.BytesToString(a.Value)
		case unix.NFTA_CHAIN_HOOK:
			n, ok := hookNum(a.Value)
			hooked = !ok || earlyHook(family, n)
		}
	}
	if !hooked {
		return ""
	}
	return fmt.Sprintf("%s %s %s", nfFamilies[family], table, chain)
}

// nfFamilies names the families an early hook is looked for in, as nft does.
var nfFamilies = map[byte]string{unix.NFPROTO_INET: "inet", unix.NFPROTO_IPV4: "ip", unix.NFPROTO_NETDEV: "netdev", unix.NFPROTO_BRIDGE: "bridge"}

// hookNum reads NFTA_HOOK_HOOKNUM from a chain's NFTA_CHAIN_HOOK.
func hookNum(nested []byte) (uint32, bool) {
	hs, err := nl.ParseRouteAttr(nested)
	if err != nil {
		return 0, false
	}
	for _, h := range hs {
		if h.Attr.Type&nlaTypeMask == unix.NFTA_HOOK_HOOKNUM && len(h.Value) >= 4 {
			return binary.BigEndian.Uint32(h.Value), true
		}
	}
	return 0, false
}

// earlyHook says whether hook n of family runs before routing on IPv4.
func earlyHook(family byte, n uint32) bool {
	switch family {
	case unix.NFPROTO_IPV4, unix.NFPROTO_NETDEV, unix.NFPROTO_BRIDGE:
		return n == unix.NF_INET_PRE_ROUTING // netdev's ingress is 0 too
	case unix.NFPROTO_INET:
		return n == unix.NF_INET_PRE_ROUTING || n == nfInetIngress
	}
	return false
}

// ownAddrs lists the addresses the namespace delivers to itself: its local
// table's local routes of one address (which stay while their device is
// down), loopback's left out (a packet from outside to one of those is a
// martian either way).
func ownAddrs() ([]netip.Addr, error) {
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_LOCAL, Type: unix.RTN_LOCAL},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_TYPE)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		ones, bits := r.Dst.Mask.Size()
		ip, ok := netip.AddrFromSlice(r.Dst.IP.To4())
		if ok && ones == 32 && bits == 32 && !ip.IsLoopback() {
			out = append(out, ip)
		}
	}
	return out, nil
}
