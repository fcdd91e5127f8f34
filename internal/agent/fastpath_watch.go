package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"

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
// The sockets wait in Go's netpoller, not in poll(2): a thread blocked in a
// system call holds its P, Go's sysmon takes it back after 10 ms and then
// polls every 20 µs for a while, so a loop of 50 ms polls woke sysmon about
// 470 times a second in an idle agent.
func watch(ctx context.Context, fds []int, kind func(i int, b []byte) int, changed func(which []bool)) error {
	files := make([]*os.File, 0, len(fds))
	got := make(chan announcement)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Closing a file wakes the reader waiting on it, and stop one waiting
	// to hand over what it read.
	defer func() {
		close(stop)
		for _, f := range files {
			f.Close()
		}
		wg.Wait()
	}()
	for i, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			closeAll(fds[i:])
			return err
		}
		files = append(files, os.NewFile(uintptr(fd), "netlink"))
	}
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readAnnouncements(f, i, kind, len(fds), got, stop)
		}()
	}
	for {
		var a announcement
		select {
		case <-ctx.Done():
			return nil
		case a = <-got:
		}
		// One invalidation covers everything queued by then.
		for more := true; more && a.err == nil; {
			select {
			case b := <-got:
				a = a.merge(b)
			default:
				more = false
			}
		}
		if a.err != nil {
			return a.err
		}
		changed(a.which)
	}
}

// announcement: which kinds one drained socket announced, or why it failed.
type announcement struct {
	which []bool
	err   error
}

func (a announcement) merge(b announcement) announcement {
	if b.err != nil {
		return b
	}
	for i, w := range b.which {
		a.which[i] = a.which[i] || w
	}
	return a
}

// readAnnouncements sends what socket i announces to got, each time it has
// drained everything queued, until stop closes or reading fails (the
// failure is sent too).
func readAnnouncements(f *os.File, i int, kind func(i int, b []byte) int, n int, got chan<- announcement, stop <-chan struct{}) {
	rc, err := f.SyscallConn()
	buf := make([]byte, 1<<16)
	for {
		a := announcement{err: err}
		if err == nil {
			a = drain(rc, i, kind, n, buf)
		}
		select {
		case got <- a:
		case <-stop:
			return
		}
		if a.err != nil {
			return
		}
	}
}

// drain waits until socket i has something queued and reads all of it.
func drain(rc syscall.RawConn, i int, kind func(i int, b []byte) int, n int, buf []byte) announcement {
	a := announcement{which: make([]bool, n)}
	err := rc.Read(func(fd uintptr) bool {
		for {
			m, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			switch {
			case errors.Is(err, unix.EAGAIN):
				return slices.Contains(a.which, true)
			case err != nil && !errors.Is(err, unix.ENOBUFS):
				a.err = err
				return true
			case err == nil:
				a.which[kind(i, buf[:m])] = true
			default: // overflowed: announcements were lost
				a.which[kind(i, nil)] = true
			}
		}
	})
	if a.err == nil {
		a.err = err
	}
	return a
}
