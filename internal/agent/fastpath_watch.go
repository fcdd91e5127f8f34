package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// The kernel's announcements that can change what the slow path does to a
// flow: links (state, MTU, master), addresses, neighbours and FDB entries
// (RTM_*NEIGH, also for AF_BRIDGE), routes, and every nftables ruleset
// generation (NFT_MSG_NEWGEN ends each committed batch, iptables-nft's
// included). Each one invalidates the whole cache: what a change affects is
// not worth computing when relearning costs one slow packet per flow.
// Neighbours and FDB entries the kernel learns from traffic, which any
// container can make it learn, invalidate at most once a second
// (fastpath_flush.go).
const (
	rtGroups = unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV4_ROUTE |
		unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV6_ROUTE | unix.RTMGRP_IPV4_RULE | 1<<(rtnlGroupIPv4Netconf-1)
	rtnlGroupIPv4Netconf = 24 // RTNLGRP_IPV4_NETCONF: ip_forward, rp_filter
	rtnlGroupNexthop     = 32 // RTNLGRP_NEXTHOP: nexthop objects
	nfnlGroupNftables    = 7  // NFNLGRP_NFTABLES
	// xfrmGroups: IPsec states and policies (XFRMNLGRP_SA, XFRMNLGRP_POLICY).
	xfrmGroups = 1<<(3-1) | 1<<(4-1)
)

// openWatch's sockets, by index: what changed() does with each.
const (
	watchRoute = iota // routes, rules, nexthops, links, netconf: invalidate
	watchNft          // nftables commits: judge the ruleset again
	watchTC           // qdiscs and filters: sync the devices again
	watchXfrm         // IPsec: judge again
	watchNeigh        // neighbours and FDB entries: invalidate, learned ones at most once a second
)

// openWatch opens the netlink sockets in namespace ns (a socket stays in
// the namespace it was made in), in the order of watchRoute and the rest.
func openWatch(ns string) (fds []int, err error) {
	err = netns.Do(ns, func() error {
		for _, w := range []struct {
			what          string
			proto, groups int
			group         int
		}{
			{"rtnetlink", unix.NETLINK_ROUTE, rtGroups, rtnlGroupNexthop},
			{"nftables notifications", unix.NETLINK_NETFILTER, 0, nfnlGroupNftables},
			{"tc notifications", unix.NETLINK_ROUTE, unix.RTMGRP_TC, 0},
			{"xfrm notifications", unix.NETLINK_XFRM, xfrmGroups, 0},
			{"neighbour notifications", unix.NETLINK_ROUTE, unix.RTMGRP_NEIGH, 0},
		} {
			fd, err := netlinkSocket(w.proto, w.groups, w.group)
			if err != nil {
				return fmt.Errorf("%s: %w", w.what, err)
			}
			fds = append(fds, fd)
		}
		return nil
	})
	if err != nil {
		closeAll(fds)
		return nil, fmt.Errorf("watch network namespace %s for changes: %w", netns.Label(ns), err)
	}
	return fds, nil
}

func netlinkSocket(proto, groups, group int) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: uint32(groups)}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if group != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, group); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	// A full receive buffer loses announcements: ENOBUFS then says so,
	// and is taken as a change too.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	return fd, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// watch calls changed for every announcement on fds until ctx ends, with
// which of them announced (by index: what kind says a datagram b received
// on fds[i] stands for, b nil when the socket overflowed); it closes fds.
func watch(ctx context.Context, fds []int, kind func(i int, b []byte) int, changed func(which []bool)) error {
	defer closeAll(fds)
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	buf := make([]byte, 1<<16)
	for ctx.Err() == nil {
		n, err := unix.Poll(pfds, 50)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if n <= 0 {
			continue
		}
		which := make([]bool, len(fds))
		for i := range pfds {
			if pfds[i].Revents == 0 {
				continue
			}
			// Drain everything queued: one invalidation covers it all.
			for {
				n, _, err := unix.Recvfrom(fds[i], buf, unix.MSG_DONTWAIT)
				if errors.Is(err, unix.EAGAIN) {
					break
				}
				if err != nil && !errors.Is(err, unix.ENOBUFS) {
					return err
				}
				var b []byte
				if err == nil {
					b = buf[:n]
				}
				which[kind(i, b)] = true
			}
		}
		if slices.Contains(which, true) {
			changed(which)
		}
	}
	return nil
}
