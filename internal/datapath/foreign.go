package datapath

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/netns"
)

// ForeignTC says what on device ifindex of namespace ns a packet the fast
// path redirects would skip ("" for nothing): tc filters that are not
// falcon's (every program of falcon's is named falcon_ or fpath_; the bandwidth CNI's u32 redirect to an ifb, another's cls_bpf)
// on its ingress and egress, and, with qdisc, a root qdisc other than
// noqueue (a TBF limit on a container's host-side veth, which
// bpf_redirect_peer passes by). tcx programs run in the order they were
// attached and are not judged here.
func ForeignTC(ns string, ifindex int, qdisc bool) (string, error) {
	var why []string
	err := netns.Do(ns, func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		qs, err := netlink.QdiscList(l)
		if err != nil {
			return err
		}
		where := map[uint32]string{}
		for _, q := range qs {
			if a := q.Attrs(); qdisc && a.Parent == netlink.HANDLE_ROOT && q.Type() != "noqueue" {
				why = append(why, fmt.Sprintf("root qdisc %s", q.Type()))
			}
			switch q.Type() {
			case "clsact":
				where[netlink.HANDLE_MIN_INGRESS], where[netlink.HANDLE_MIN_EGRESS] = "ingress", "egress"
			case "ingress": // the old ingress qdisc (ffff:), as the bandwidth CNI adds
				where[q.Attrs().Handle] = "ingress"
			}
		}
		for parent, dir := range where {
			fs, err := netlink.FilterList(l, parent)
			if err != nil {
				continue // no clsact or ingress qdisc: no filters
			}
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && (strings.HasPrefix(bf.Name, pinPrefix) || strings.HasPrefix(bf.Name, fastPrefix)) {
					continue
				}
				why = append(why, fmt.Sprintf("tc filter %s on %s", f.Type(), dir))
			}
		}
		return nil
	})
	slices.Sort(why)
	return strings.Join(why, ", "), err
}
