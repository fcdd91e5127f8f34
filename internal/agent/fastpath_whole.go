package agent

import (
	"os"
	"strings"

	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// forwardingSysctl is what a container must leave at 0 to take TCP
// aggregates whole on the fast path.
const forwardingSysctl = "/proc/sys/net/ipv4/conf/all/forwarding"

// refreshWhole tells the fast path which containers of the last sync take
// TCP aggregates whole: those whose namespace does not forward IPv4
// (datapath.SetWhole says why). The agent looks at each sync and every
// second, so a container that starts forwarding may get aggregates for a
// second more, which it drops as a device without the tunnel GSO feature
// would. f.mu is held.
func (f *fastPath) refreshWhole() {
	if f.ov == nil {
		return
	}
	seen := map[int]bool{}
	for _, d := range f.ov.Devices {
		if d.Role != discover.RoleHostVeth || d.Peer == nil {
			continue
		}
		whole := !forwards(d.Peer.Netns)
		seen[d.Ifindex] = true
		if was, ok := f.whole[d.Ifindex]; ok && was == whole {
			continue
		}
		if err := f.fp.SetWhole(d.Ifindex, whole); err != nil {
			f.log.Warn("fast path: TCP aggregates", "veth", d.String(), "err", err)
			continue
		}
		f.whole[d.Ifindex] = whole
	}
	for ifindex := range f.whole {
		if !seen[ifindex] {
			f.fp.SetWhole(ifindex, false)
			delete(f.whole, ifindex)
		}
	}
}

// forwards says whether namespace ns forwards IPv4; one that cannot be
// read counts as forwarding.
func forwards(ns string) bool {
	var b []byte
	err := netns.Do(ns, func() error {
		var err error
		b, err = os.ReadFile(forwardingSysctl)
		return err
	})
	return err != nil || strings.TrimSpace(string(b)) != "0"
}
