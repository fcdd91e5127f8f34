package agent

import (
	"fmt"
	"slices"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// refreshWhole tells the fast path which TCP aggregates each container of
// the last sync takes whole (wholeOf; datapath.Whole says why it
// matters). The agent looks at each sync and every second, so a container
// that starts forwarding, or adds a chain before routing, may get
// aggregates whole for up to a second more (what it then does with one it
// forwards is not checked). f.mu is held.
func (f *fastPath) refreshWhole() {
	if f.ov == nil {
		return
	}
	seen := map[int]bool{}
	for _, d := range f.ov.Devices {
		if d.Role != discover.RoleHostVeth || d.Peer == nil {
			continue
		}
		w, why := wholeOf(d.Peer.Netns)
		seen[d.Ifindex] = true
		if why != "" {
			f.slowAgg[d.Ifindex] = fmt.Sprintf("%s (%s): %s", d.Peer.Name, netns.Label(d.Peer.Netns), why)
		} else {
			delete(f.slowAgg, d.Ifindex)
		}
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
			delete(f.slowAgg, ifindex)
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
// none. why says why it takes none.
func wholeOf(ns string) (w datapath.Whole, why string) {
	err := netns.Do(ns, func() error {
		fwd, err := forwardsAnywhere()
		if err != nil || !fwd {
			w.Any = !fwd
			return err
		}
		nat, err := destNAT()
		if err != nil {
			return err
		}
		if nat != "" {
			why = "it forwards, and " + nat + " may rewrite a destination before routing"
			return nil
		}
		w.Addrs, err = ownAddrs()
		if err == nil && len(w.Addrs) == 0 {
			why = "it forwards, and has no address of its own"
		}
		return err
	})
	if err != nil {
		return datapath.Whole{}, fmt.Sprintf("its forwarding could not be read: %v", err)
	}
	return w, why
}

func sameWhole(a, b datapath.Whole) bool {
	return a.Any == b.Any && slices.Equal(a.Addrs, b.Addrs)
}
