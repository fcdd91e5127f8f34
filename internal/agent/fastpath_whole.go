package agent

import (
	"fmt"
	"os"
	"path/filepath"
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
	seen, byNS := map[int]bool{}, map[string]wholeRead{}
	legacy := legacyLoaded()
	for _, d := range f.ov.Devices {
		if d.Role != discover.RoleHostVeth || d.Peer == nil {
			continue
		}
		rd, ok := byNS[d.Peer.Netns]
		if !ok {
			rd.w, rd.why = f.readWhole(d.Peer.Netns, legacy)
			byNS[d.Peer.Netns] = rd
		}
		seen[d.Ifindex] = true
		if rd.why != "" {
			f.slowAgg[d.Ifindex] = fmt.Sprintf("%s (%s): %s", d.Peer.Name, netns.Label(d.Peer.Netns), rd.why)
		} else {
			delete(f.slowAgg, d.Ifindex)
		}
		if was, ok := f.whole[d.Ifindex]; ok && sameWhole(was, rd.w) {
			continue
		}
		if err := f.fp.SetWhole(d.Ifindex, rd.w); err != nil {
			f.log.Warn("fast path: TCP aggregates", "veth", d.String(), "err", err)
			continue
		}
		f.whole[d.Ifindex] = rd.w
	}
	for ifindex := range f.whole {
		if !seen[ifindex] {
			f.fp.SetWhole(ifindex, datapath.Whole{})
			delete(f.whole, ifindex)
			delete(f.slowAgg, ifindex)
		}
	}
	f.closeReaders(byNS)
}

// closeReaders closes the readers of namespaces not in keep (nil: all),
// which lets those namespaces go.
func (f *fastPath) closeReaders(keep map[string]wholeRead) {
	for ns, r := range f.readers {
		if _, ok := keep[ns]; !ok {
			r.close()
			delete(f.readers, ns)
		}
	}
}

type wholeRead struct {
	w   datapath.Whole
	why string
}

// readWhole is wholeOf over namespace ns's reader, opened again where the
// name now names another namespace or none (so a namespace gone is let go
// within a second), where x_tables was loaded after it opened, or where
// it failed.
func (f *fastPath) readWhole(ns string, legacy int) (datapath.Whole, string) {
	if f.readers == nil {
		f.readers = map[string]*nsReader{}
	}
	r := f.readers[ns]
	if r != nil {
		if ino, err := netns.Inode(ns); err != nil || ino != r.ino || len(r.legacy) < legacy {
			r.close()
			delete(f.readers, ns)
			r = nil
		}
	}
	if r == nil {
		var err error
		if r, err = openNSReader(ns); err != nil {
			return datapath.Whole{}, fmt.Sprintf("its forwarding could not be read: %v", err)
		}
		f.readers[ns] = r
	}
	w, why, err := wholeOf(r)
	if err != nil {
		r.close()
		delete(f.readers, ns)
	}
	return w, why
}

// legacyLoaded counts the legacy-table files a namespace has now: none
// until x_tables is loaded, which makes them in every namespace.
func legacyLoaded() int {
	n := 0
	for _, name := range legacyFiles {
		if _, err := os.Stat(filepath.Join("/proc/self/net", name)); err == nil {
			n++
		}
	}
	return n
}

// wholeOf reads which TCP aggregates the container of r's namespace takes
// whole: all where it forwards IPv4 on no device; else, where nothing in
// it may rewrite a destination before routing (destNAT), those to its own
// addresses, which the kernel delivers there whatever forwarding says.
// That is the common case, not an exception: a namespace starts with the
// forwarding settings of the host's (net.core.devconf_inherit_init_net 0),
// and a host that runs containers forwards. What cannot be read takes
// none. why says why it takes none.
func wholeOf(r *nsReader) (w datapath.Whole, why string, err error) {
	fwd, err := r.forwardsAnywhere()
	if err == nil && fwd {
		var nat string
		if nat, err = r.destNAT(); nat != "" {
			return datapath.Whole{}, "it forwards, and " + nat + " may rewrite a destination before routing", nil
		}
		if err == nil {
			w.Addrs, err = r.ownAddrs()
		}
		if err == nil && len(w.Addrs) == 0 {
			why = "it forwards, and has no address of its own"
		}
	}
	if err != nil {
		return datapath.Whole{}, fmt.Sprintf("its forwarding could not be read: %v", err), err
	}
	w.Any = !fwd
	return w, why, nil
}

func sameWhole(a, b datapath.Whole) bool {
	return a.Any == b.Any && slices.Equal(a.Addrs, b.Addrs)
}
