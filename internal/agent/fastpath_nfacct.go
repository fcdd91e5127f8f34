package agent

import (
	"encoding/binary"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// nfnetlink_acct (include/uapi/linux/netfilter/nfnetlink_acct.h).
const (
	nfnlSubsysAcct = 7
	nfnlMsgAcctGet = 1
	nfacctFlags    = 5
	nfacctQuotaAny = 1 | 2 // NFACCT_F_QUOTA_PKTS | NFACCT_F_QUOTA_BYTES
)

// nfacctQuota says whether an accounting object of ns has a quota: an xt
// nfacct match matches every packet unless its object has one. An object
// keeps its flags for life and cannot go while a rule uses it, so a quota
// can come only with a rule change, which is judged again.
func nfacctQuota(ns string) (bool, error) {
	var msgs [][]byte
	err := netns.Do(ns, func() error {
		fd, err := nlSocket(unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		msgs, err = nlDump(fd, 1, nfnlSubsysAcct<<8|nfnlMsgAcctGet, []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("read the accounting objects (nfacct) of network namespace %s: %w", netns.Label(ns), err)
	}
	return slices.ContainsFunc(msgs, hasQuota), nil
}

// hasQuota says whether an accounting object (a reply's payload: nfgenmsg
// and attributes) has a quota.
func hasQuota(m []byte) bool {
	quota := false
	if len(m) >= 4 {
		walkAttrs(m[4:], func(typ uint16, val []byte) {
			if typ == nfacctFlags && len(val) >= 4 && binary.BigEndian.Uint32(val)&nfacctQuotaAny != 0 {
				quota = true
			}
		})
	}
	return quota
}
