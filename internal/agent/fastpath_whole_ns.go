package agent

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// nfInetIngress is NF_INET_INGRESS, the inet family's ingress hook (Linux 5.10).
const nfInetIngress = 5

// nsReader reads what wholeOf needs from a container's namespace over
// netlink sockets and legacy-table files opened there once: entering a
// namespace and listing its sysctl directory each second cost a third of
// a millisecond a container. What it holds keeps the namespace alive, so
// the reader is closed as soon as its name no longer names that namespace
// (readWhole) or the container goes (refreshWhole).
type nsReader struct {
	ino    uint64 // the namespace's, when opened
	rt, nf int    // NETLINK_ROUTE, NETLINK_NETFILTER sockets
	legacy []*os.File
	seq    uint32
}

// legacyFiles list a namespace's legacy tables; they exist once x_tables
// is loaded, in every namespace at once.
var legacyFiles = []string{"ip_tables_names", "ip6_tables_names"}

// openNSReader opens a reader of namespace ns.
func openNSReader(ns string) (*nsReader, error) {
	ino, err := netns.Inode(ns)
	if err != nil {
		return nil, err
	}
	r := &nsReader{ino: ino, rt: -1, nf: -1}
	err = netns.Do(ns, func() error {
		if now, err := netns.Inode(ns); err != nil || now != ino {
			return fmt.Errorf("namespace %s changed while opened", ns)
		}
		var err error
		if r.rt, err = nlSocket(unix.NETLINK_ROUTE); err != nil {
			return err
		}
		if r.nf, err = nlSocket(unix.NETLINK_NETFILTER); err != nil {
			return err
		}
		for _, name := range legacyFiles {
			if f, err := os.Open(filepath.Join("/proc/thread-self/net", name)); err == nil {
				r.legacy = append(r.legacy, f)
			}
		}
		return nil
	})
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *nsReader) close() {
	closeAll([]int{r.rt, r.nf})
	for _, f := range r.legacy {
		f.Close()
	}
	r.rt, r.nf, r.legacy = -1, -1, nil
}

func (r *nsReader) dump(fd int, typ uint16, body []byte) ([][]byte, error) {
	r.seq++
	return nlDump(fd, r.seq, typ, body)
}

// netconfa* are NETCONFA_IFINDEX, NETCONFA_FORWARDING and
// NETCONFA_IFINDEX_DEFAULT (linux/netconf.h), which x/sys/unix lacks.
const (
	netconfaIfindex    = 1
	netconfaForwarding = 2
	netconfIfDefault   = -2
)

// forwardsAnywhere says whether the namespace forwards IPv4 on any device
// ("all" included; "default" only seeds devices yet to come).
func (r *nsReader) forwardsAnywhere() (bool, error) {
	msgs, err := r.dump(r.rt, unix.RTM_GETNETCONF, []byte{unix.AF_INET, 0, 0, 0})
	if err != nil {
		return true, err
	}
	for _, m := range msgs {
		if len(m) < 4 {
			continue
		}
		ifindex, fwd := int32(0), int32(0)
		walkAttrs(m[4:], func(typ uint16, val []byte) {
			if len(val) >= 4 && (typ == netconfaIfindex || typ == netconfaForwarding) {
				v := int32(binary.NativeEndian.Uint32(val))
				if typ == netconfaIfindex {
					ifindex = v
				} else {
					fwd = v
				}
			}
		})
		if ifindex != netconfIfDefault && fwd != 0 {
			return true, nil
		}
	}
	return false, nil
}

// legacyNAT says whether the namespace has a legacy nat table (IPv4's or
// IPv6's).
func (r *nsReader) legacyNAT() (bool, error) {
	buf := make([]byte, 4096)
	for _, f := range r.legacy {
		n, err := f.ReadAt(buf, 0)
		if err != nil && err != io.EOF {
			return false, err
		}
		if slices.Contains(strings.Fields(string(buf[:n])), "nat") {
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
func (r *nsReader) destNAT() (string, error) {
	if nat, err := r.legacyNAT(); nat || err != nil {
		if err != nil {
			return "", err
		}
		return "the legacy iptables nat table", nil
	}
	msgs, err := r.dump(r.nf, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETCHAIN,
		[]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}) // struct nfgenmsg
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
func (r *nsReader) ownAddrs() ([]netip.Addr, error) {
	req := make([]byte, unix.SizeofRtMsg)
	req[0] = unix.AF_INET // rtm_family
	msgs, err := r.dump(r.rt, unix.RTM_GETROUTE, req)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, m := range msgs {
		if len(m) < unix.SizeofRtMsg || m[0] != unix.AF_INET || m[1] != 32 || m[7] != unix.RTN_LOCAL {
			continue // family, dst_len, type
		}
		table := uint32(m[4])
		var dst netip.Addr
		walkAttrs(m[unix.SizeofRtMsg:], func(typ uint16, val []byte) {
			switch {
			case typ == unix.RTA_TABLE && len(val) >= 4:
				table = binary.NativeEndian.Uint32(val)
			case typ == unix.RTA_DST && len(val) == 4:
				dst = netip.AddrFrom4([4]byte(val))
			}
		})
		if table == unix.RT_TABLE_LOCAL && dst.IsValid() && !dst.IsLoopback() {
			out = append(out, dst)
		}
	}
	return out, nil
}
