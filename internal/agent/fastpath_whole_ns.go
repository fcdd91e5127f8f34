package agent

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"golang.org/x/sys/unix"
)

// What wholeOf reads inside a container's namespace (the calling thread's).

// nfInetIngress is NF_INET_INGRESS, the inet family's ingress hook (Linux 5.10).
const nfInetIngress = 5

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
	if slices.Contains(legacyNames(), "nat") {
		return "the legacy iptables nat table", nil
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
// that sees IPv4: "family table chain".
func beforeRouting(family byte, attrs []byte) string {
	var table, chain string
	hooked := false
	walkAttrs(attrs, func(typ uint16, val []byte) {
		switch typ {
		case unix.NFTA_CHAIN_TABLE:
			table = strings.TrimRight(string(val), "\x00")
		case unix.NFTA_CHAIN_NAME:
			chain = strings.TrimRight(string(val), "\x00")
		case unix.NFTA_CHAIN_HOOK:
			n, ok := hookNum(val)
			hooked = !ok || earlyHook(family, n)
		}
	})
	if !hooked {
		return ""
	}
	return fmt.Sprintf("%s %s %s", nfFamilies[family], table, chain)
}

// nfFamilies names the families an early hook is looked for in, as nft does.
var nfFamilies = map[byte]string{unix.NFPROTO_INET: "inet", unix.NFPROTO_IPV4: "ip", unix.NFPROTO_NETDEV: "netdev", unix.NFPROTO_BRIDGE: "bridge"}

// hookNum reads NFTA_HOOK_HOOKNUM from a chain's NFTA_CHAIN_HOOK.
func hookNum(nested []byte) (n uint32, ok bool) {
	walkAttrs(nested, func(typ uint16, val []byte) {
		if typ == unix.NFTA_HOOK_HOOKNUM && len(val) >= 4 {
			n, ok = binary.BigEndian.Uint32(val), true
		}
	})
	return n, ok
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
