package xdpsend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// Learn captures how the overlay carries a datagram of size bytes from
// namespace client to addr:port: it sends such datagrams from client until
// one leaves the sending host through nic (in namespace host), and returns
// that frame as a template. Whatever the layout (host networking, a VXLAN
// of the testbed's or of a real daemon's), the frame is the overlay's own:
// nothing here encodes how a layout encapsulates.
func Learn(ctx context.Context, host, nic, client, addr string, port, size int) (Template, error) {
	var fd int
	err := netns.Do(host, func() error {
		ifi, err := net.InterfaceByName(nic)
		if err != nil {
			return fmt.Errorf("wire device %s: %w", nic, err)
		}
		// ETH_P_ALL: a tap on one protocol sees only frames received.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("packet socket on %s: %w", nic, err)
		}
		return nil
	})
	if err != nil {
		return Template{}, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return Template{}, err
	}
	var conn net.Conn
	if err := netns.Do(client, func() (err error) {
		conn, err = net.Dial("udp4", net.JoinHostPort(addr, strconv.Itoa(port)))
		return err
	}); err != nil {
		return Template{}, fmt.Errorf("datagram socket in %s: %w", client, err)
	}
	defer conn.Close()

	payload := make([]byte, size)
	buf := make([]byte, 65536)
	var last error
	deadline := time.Now().Add(3 * time.Second) // ARP on the underlay and the overlay comes first
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return Template{}, err
		}
		if _, err := conn.Write(payload); err != nil && !errors.Is(err, unix.ECONNREFUSED) {
			return Template{}, fmt.Errorf("send a datagram from %s to %s:%d: %w", client, addr, port, err)
		}
		for until := time.Now().Add(100 * time.Millisecond); time.Now().Before(until); {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				return Template{}, fmt.Errorf("capture on %s: %w", nic, err)
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_OUTGOING {
				continue
			}
			t, err := ParseFrame(buf[:n], port)
			switch {
			case err == nil:
				return t, nil
			case errors.Is(err, ErrFragmented):
				return t, fmt.Errorf("a %d B datagram from %s to %s:%d: %w (the kernel sender sends one frame per datagram: use a size that fits the overlay's MTU)",
					size, client, addr, port, err)
			}
			last = err
		}
	}
	if last != nil {
		return Template{}, fmt.Errorf("no frame of a datagram to %s:%d left %s within 3 s (last frame seen: %v)", addr, port, nic, last)
	}
	return Template{}, fmt.Errorf("no frame of a datagram to %s:%d left %s within 3 s", addr, port, nic)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
