package agent

import (
	"slices"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// refreshWhole tells the fast path which TCP aggregates each container of
// the last sync takes whole (wholeOf; datapath.Whole says why it
// matters). The agent looks at each sync and every second, so a container
// that starts forwarding may get aggregates for a second more, which it
// drops as a device without the tunnel GSO feature would. f.mu is held.
func (f *fastPath) refreshWhole() {
	if f.ov == nil {
		return
	}
	seen := map[int]bool{}
	for _, d := range f.ov.Devices {
		if d.Role != discover.RoleHostVeth || d.Peer == nil {
			continue
		}
		w := wholeOf(d.Peer.Netns)
		seen[d.Ifindex] = true
		if was, ok := f.whole[d.Ifindex]; ok && sameWhole(was, w) {
			continue
		}
		if err := f.fp.SetWhole(d.Ifindex, w); err != nil {
			f.log.Warn("fast path: TCP aggregates", "veth", d.String(), "err", err)
			continue
		}
		f.whole[d.Ifindex] = w
	}
	for ifindex := range f.whole {
		if !seen[ifindex] {
			f.fp.SetWhole(ifindex, datapath.Whole{})
			delete(f.whole, ifindex)
		}
	}
}

// wholeOf reads which TCP aggregates the container of namespace ns takes
// whole: all where it forwards IPv4 on no device; else, where nothing in
// it may rewrite a destination before routing (destNAT), those to its own
// addresses, which the kernel delivers there whatever forwarding says.
// That is the common case, not an exception: a namespace starts with the
// forwarding settings of the host's (net.core.devconf_inherit_init_net 0),
// and a host that runs containers forwards. What cannot be read takes
// none.
func wholeOf(ns string) datapath.Whole {
	var w datapath.Whole
	err := netns.Do(ns, func() error {
		fwd, err := forwardsAnywhere()
		if err != nil || !fwd {
			w.Any = !fwd
			return err
		}
		if nat, err := destNAT(); err != nil || nat {
			return err
		}
		w.Addrs, err = ownAddrs()
		return err
	})
	if err != nil {
		return datapath.Whole{}
	}
	return w
}

func sameWhole(a, b datapath.Whole) bool {
	return a.Any == b.Any && slices.Equal(a.Addrs, b.Addrs)
}
