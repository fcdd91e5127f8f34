package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWatchSockets: watch hands what each socket received to changed, by
// the index kind gives it, and once ctx ends returns at once with every
// socket closed. Datagram socket pairs stand in for the netlink sockets:
// watch only receives from them.
func TestWatchSockets(t *testing.T) {
	var fds, peers []int
	for range 2 {
		p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds, peers = append(fds, p[0]), append(peers, p[1])
		t.Cleanup(func() { unix.Close(p[1]) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan []bool, 8)
	done := make(chan error, 1)
	go func() {
		done <- watch(ctx, fds, func(i int, b []byte) int { return i }, func(which []bool) { changes <- which })
	}()
	for i, p := range peers {
		if _, err := unix.Write(p, []byte("announcement")); err != nil {
			t.Fatal(err)
		}
		select {
		case which := <-changes:
			if !which[i] || which[1-i] {
				t.Fatalf("socket %d announced, changed got %v", i, which)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("socket %d announced, changed was not called", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not return after its context ended")
	}
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("fd %d still open after watch returned (%v)", fd, err)
		}
	}
}
