package agent

import (
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// The host's ruleset is judged again at every change (docs/fastpath.md,
// Policy): the fast path may only carry what netfilter decides once per
// flow, and a rule added later can decide per packet. Invariant: from the
// moment an nftables commit is announced until its ruleset is judged safe,
// the programs use no cache; a ruleset judged unsafe keeps them off, with
// the reason in status, until a later commit makes it safe again. Legacy
// (x_tables) tables are announced to no one: their appearance is polled,
// once a second.

// changed handles the watch's announcements (which: by watchRoute's
// indices): every one invalidates the caches; an nftables commit or an
// IPsec change also has the host judged again, the fast path off
// meanwhile; a tc change has the devices synced again (a container's
// host-side veth with tc policy of its own is left to the slow path).
// Learned neighbours and FDB entries alone invalidate at most once a second.
func (f *fastPath) changed(which []bool) {
	if which[watchNeigh] && !slices.Contains(which[:watchNeigh], true) {
		f.learned.request(f.invalidate)
		return
	}
	rejudge := which[watchNft] || which[watchXfrm] || which[watchTC]
	if rejudge {
		f.fp.SetOn(false)
	}
	f.invalidate()
	if which[watchTC] {
		f.mu.Lock()
		h, ov := f.h, f.ov
		f.mu.Unlock()
		if err := f.sync(h, ov); err != nil {
			f.log.Error("fast path: sync after a tc change", "err", err)
		}
	}
	if rejudge {
		f.judge()
	}
}

// unsafeHost says why the host's policy outside its containers' veths
// keeps the fast path off: its ruleset, IPsec, tc policy on the NIC that a
// redirected packet would skip. established: the ruleset is safe only for
// established connections (unsafeRules).
func unsafeHost(ns string, ov *discover.Overlay) (reason string, established bool) {
	reason, established, err := unsafeRules(ns)
	if err != nil {
		return "the ruleset could not be read: " + err.Error(), false
	}
	if reason != "" {
		return reason, false
	}
	return unsafeHostPolicy(ns, ov), established
}

// unsafeHostPolicy is unsafeHost beyond the ruleset.
func unsafeHostPolicy(ns string, ov *discover.Overlay) string {
	var ipsec int
	netns.Do(ns, func() error {
		ps, err := netlink.XfrmPolicyList(netlink.FAMILY_ALL)
		ipsec = len(ps)
		return err
	})
	if ipsec > 0 {
		return fmt.Sprintf("%d IPsec (xfrm) policies, which cached flows would bypass", ipsec)
	}
	for _, nic := range ov.Role(discover.RoleNIC) {
		why, err := datapath.ForeignTC(nic.Netns, nic.Ifindex, false)
		if err != nil {
			return fmt.Sprintf("the tc configuration of %s could not be read: %v", nic.Name, err)
		}
		if why != "" {
			return fmt.Sprintf("%s on %s, which packets the fast path delivers would skip", why, nic.Name)
		}
	}
	return ""
}

// judge judges the host and turns the programs' caches on or off by it;
// a ruleset safe for established connections alone has every flow wait
// for conntrack to have its connection ESTABLISHED.
func (f *fastPath) judge() {
	f.mu.Lock()
	ov := f.ov
	f.mu.Unlock()
	reason, est := unsafeHost(f.ns, ov)
	if reason == "" && est && f.ct == nil {
		reason = "rules that send packets of new connections to user space (queue), and no connection tracking to tell which are established"
	}
	f.mu.Lock()
	was, wasEst := f.off, f.est
	f.off = reason
	if reason == "" {
		f.est = est
	}
	f.mu.Unlock()
	if reason != "" {
		f.fp.SetOn(false)
		if was != reason {
			f.log.Warn("fast path off: the host decides per packet", "netns", netns.Label(f.ns), "why", reason)
		}
		return
	}
	if est != wasEst {
		// No entry learned under the other gate may be used.
		f.fp.SetOn(false)
		f.invalidate()
		if f.ct != nil {
			f.ct.SetEstablishedOnly(est)
		}
		if err := f.fp.SetEstablishedOnly(est); err != nil {
			f.log.Error("fast path off: set the conntrack gate", "err", err)
			return
		}
	}
	if err := f.fp.SetOn(true); err == nil && was != "" {
		f.log.Info("fast path on again: the host's ruleset is safe", "netns", netns.Label(f.ns))
	}
}

// legacyAppeared says whether ns has legacy iptables tables now (a cheap
// read of /proc/net; judge says which).
func legacyAppeared(ns string) bool {
	found := false
	netns.Do(ns, func() error {
		found = len(legacyNames()) > 0
		return nil
	})
	return found
}
