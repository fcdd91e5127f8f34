package agent

import (
	"os"
	"strings"

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

// changed handles the watch's announcements: every one invalidates the
// caches; an nftables commit also has the ruleset judged again, the fast
// path off meanwhile.
func (f *fastPath) changed(which []bool) {
	nft := len(which) > watchNft && which[watchNft]
	if nft {
		f.fp.SetOn(false)
	}
	f.invalidate()
	if nft {
		f.judge()
	}
}

// judge judges the host's ruleset and turns the programs' caches on or
// off by it.
func (f *fastPath) judge() {
	reason, err := unsafeRules(f.ns)
	if err != nil {
		reason = "the ruleset could not be read: " + err.Error()
	}
	f.mu.Lock()
	was := f.off
	f.off = reason
	f.mu.Unlock()
	if reason != "" {
		f.fp.SetOn(false)
		if was != reason {
			f.log.Warn("fast path off: the host's netfilter decides per packet", "netns", netns.Label(f.ns), "why", reason)
		}
		return
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
		for _, p := range []string{"/proc/net/ip_tables_names", "/proc/net/ip6_tables_names"} {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) != "" {
				found = true
			}
		}
		return nil
	})
	return found
}
