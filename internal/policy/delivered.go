package policy

import (
	"context"
	"errors"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// test runs the A/B test's four windows, A B B A, A being the state falcon
// is in (stood down, or on the path), and says what each delivered. It
// ends in state A; the verdict's switch comes after.
func (e *Engine) test(ctx context.Context) Test {
	down, _ := e.mode.Path()
	a := !down
	// probing first: whoever waits for it to clear then sees every begun
	// test either counted as ended (thin, tested) or not yet begun.
	e.probing.Store(true)
	defer e.probing.Store(false)
	e.p.Counters.Probes.Add(1)
	var t Test
	for _, steer := range []bool{a, !a, !a, a} {
		if e.onPath(steer, "") != nil {
			return Test{Void: true}
		}
		d, ok := e.deliveredOver(ctx, engageWindow)
		if !ok {
			return Test{Void: true}
		}
		t.Packets += d.packets
		if steer {
			t.Steering = append(t.Steering, d.score)
		} else {
			t.Off = append(t.Off, d.score)
		}
	}
	t.At = time.Now()
	return t
}

// delivery is what the containers' sockets received: score, UDP datagrams
// and TCP bytes in segments of a 1500-byte MTU, which the verdict
// compares; packets, UDP datagrams and TCP segments as received, which
// say whether there was traffic enough to tell.
type delivery struct{ score, packets uint64 }

// deliveredOver says what the containers' sockets received during d.
func (e *Engine) deliveredOver(ctx context.Context, d time.Duration) (delivery, bool) {
	nss := e.mode.Netns()
	b0, ok := e.delivered(nss)
	if !ok {
		return delivery{}, false
	}
	select {
	case <-ctx.Done():
		return delivery{}, false
	case <-time.After(d):
	}
	b1, ok := e.delivered(nss)
	ok = ok && b1.score >= b0.score && b1.packets >= b0.packets
	return delivery{b1.score - b0.score, b1.packets - b0.packets}, ok
}

// TCP is counted in bytes, not in Tcp InSegs: the kernel counts a GRO
// batch as one segment there, and steering changes how much GRO merges
// (the NIC poll of a CPU relieved of the later stages runs more often, on
// fewer packets), so segments could rise while fewer bytes arrive.
// tcpSegment converts the bytes, so that one window's UDP datagrams and
// TCP traffic add up.
const tcpSegment = 1448

func (e *Engine) delivered(nss []string) (delivery, bool) {
	var n delivery
	for _, ns := range nss {
		s, err := procfs.ReadSNMP(ns)
		if err != nil {
			return n, false // a container came or went: this window is void
		}
		udp, segs := uint64(s.UDP("InDatagrams")), uint64(s["Tcp"]["InSegs"]) // UDP: IPv4 and IPv6
		n.packets += udp + segs
		n.score += udp
		if e.noSockDiag.Load() {
			n.score += segs
			continue
		}
		b, err := tcpBytesReceived(ns)
		switch {
		case unsupported(err):
			// A kernel without sock_diag for TCP (CONFIG_INET_TCP_DIAG
			// off or not loadable): segments, for every window from now on.
			e.noSockDiag.Store(true)
			e.p.Log.Warn("engagement test: no TCP socket statistics (sock_diag); TCP is scored by Tcp InSegs, which counts a GRO batch as one", "err", err)
			return n, false
		case err != nil:
			return n, false
		}
		n.score += b / tcpSegment
	}
	return n, len(nss) > 0
}

func unsupported(err error) bool {
	return errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.EAFNOSUPPORT)
}

// tcpBytesReceived sums tcpi_bytes_received over ns's TCP sockets (sock_diag).
// A socket that closes takes its bytes along, so the sum may fall: the
// caller voids such a window.
func tcpBytesReceived(ns string) (uint64, error) {
	var sum uint64
	err := netns.Do(ns, func() error {
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			socks, err := netlink.SocketDiagTCPInfo(family)
			if err != nil {
				return err // an interrupted dump too: its sum would be short
			}
			for _, s := range socks {
				if s.TCPInfo != nil {
					sum += s.TCPInfo.Bytes_received
				}
			}
		}
		return nil
	})
	return sum, err
}
