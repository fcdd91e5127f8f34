package agent

import (
	"encoding/binary"
	"fmt"
	"syscall"

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
	var quota bool
	err := netns.Do(ns, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		req := make([]byte, unix.NLMSG_HDRLEN+4) // nlmsghdr, nfgenmsg
		binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
		binary.NativeEndian.PutUint16(req[4:], nfnlSubsysAcct<<8|nfnlMsgAcctGet)
		binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
		binary.NativeEndian.PutUint32(req[8:], 1)
		req[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return err
		}
		buf := make([]byte, 1<<16)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return err
			}
			done, q, err := nfacctReply(buf[:n])
			quota = quota || q
			if err != nil || done {
				return err
			}
		}
	})
	if err != nil {
		return false, fmt.Errorf("read the accounting objects (nfacct) of network namespace %s: %w", netns.Label(ns), err)
	}
	return quota, nil
}

// nfacctReply reads one datagram of the dump: whether it ended, and
// whether an object in it has a quota.
func nfacctReply(b []byte) (done, quota bool, err error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return false, false, err
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_DONE:
			return true, quota, nil
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
					return true, quota, unix.Errno(-errno)
				}
			}
			return true, quota, nil
		}
		if len(m.Data) < 4 {
			continue
		}
		walkAttrs(m.Data[4:], func(typ uint16, val []byte) {
			if typ == nfacctFlags && len(val) >= 4 && binary.BigEndian.Uint32(val)&nfacctQuotaAny != 0 {
				quota = true
			}
		})
	}
	return false, quota, nil
}
