// Package conntrack reads and changes single entries of the kernel's
// connection tracking through ctnetlink, in one network namespace: what
// the fast path needs to leave the host's conntrack as if its packets had
// passed (docs/fastpath.md#conntrack).
//
// Invariant: it only ever changes an entry that exists (never creates or
// deletes one), and only its timeout, its ASSURED bit and its TCP
// window-tracking flags (liberal), which the kernel accepts from ctnetlink
// for a confirmed entry.
package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// ErrNotFound: no entry tracks the tuple (the connection is untracked, or
// tracked in a zone other than 0).
var ErrNotFound = errors.New("conntrack: no such entry")

// Status bits (include/uapi/linux/netfilter/nf_conntrack_common.h).
const (
	SeenReply uint32 = 1 << 1
	Assured   uint32 = 1 << 2
)

// TCPEstablished is TCP_CONNTRACK_ESTABLISHED.
const TCPEstablished = 3

// Tuple is one direction of a connection; ports in host order.
type Tuple struct {
	Src, Dst     netip.Addr
	Sport, Dport uint16
	Proto        uint8
}

// Entry is what an entry says of itself.
type Entry struct {
	Status   uint32
	Timeout  uint32 // seconds left
	TCPState uint8  // TCP only
}

// Change is what Update sets; zero fields are left as they are.
type Change struct {
	Timeout uint32 // seconds from now
	Status  uint32 // the entry's status with bits added (the kernel refuses to clear any, or to set others than ASSURED and SEEN_REPLY)
	Liberal bool   // TCP: no window checks, both directions
}

// Conn is a ctnetlink socket in one namespace.
type Conn struct {
	mu  sync.Mutex
	fd  int
	seq uint32
}

// Open opens ctnetlink in namespace ns ("" for the caller's).
func Open(ns string) (*Conn, error) {
	c := &Conn{fd: -1}
	err := netns.Do(ns, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		c.fd = fd
		return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("conntrack: open ctnetlink in %s: %w", netns.Label(ns), err)
	}
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return c, nil
}

// Close closes the socket.
func (c *Conn) Close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// Get reads the entry that tracks t (either direction).
func (c *Conn) Get(t Tuple) (Entry, error) {
	var e Entry
	msgs, err := c.do(ipctnlMsgCtGet, 0, tupleAttrs(t))
	if err != nil {
		return e, err
	}
	for _, m := range msgs {
		if len(m) > nfgenLen {
			parseEntry(m[nfgenLen:], &e)
			return e, nil
		}
	}
	return e, ErrNotFound
}

// Update changes the entry that tracks t as ch says.
func (c *Conn) Update(t Tuple, ch Change) error {
	b := tupleAttrs(t)
	if ch.Timeout > 0 {
		b = attr(b, ctaTimeout, be32(ch.Timeout))
	}
	if ch.Status != 0 {
		b = attr(b, ctaStatus, be32(ch.Status))
	}
	if ch.Liberal {
		flags := []byte{ipCtTCPFlagBeLiberal, ipCtTCPFlagBeLiberal} // struct nf_ct_tcp_flags: flags, mask
		tcp := attr(attr(nil, ctaProtoinfoTCPFlagsOrig, flags), ctaProtoinfoTCPFlagsReply, flags)
		b = attr(b, ctaProtoinfo|unix.NLA_F_NESTED, attr(nil, ctaProtoinfoTCP|unix.NLA_F_NESTED, tcp))
	}
	_, err := c.do(ipctnlMsgCtNew, unix.NLM_F_ACK, b)
	return err
}

// do sends one request and collects its answers until the ACK or error.
func (c *Conn) do(msgType uint16, flags uint16, attrs []byte) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil, errors.New("conntrack: closed")
	}
	c.seq++
	body := append([]byte{unix.AF_INET, 0, 0, 0}, attrs...) // nfgenmsg: family, version, res_id
	h := unix.NlMsghdr{
		Len: uint32(unix.SizeofNlMsghdr + len(body)), Type: nfnlSubsysCtnetlink<<8 | msgType,
		Flags: unix.NLM_F_REQUEST | flags, Seq: c.seq,
	}
	msg := make([]byte, unix.SizeofNlMsghdr, h.Len)
	binary.NativeEndian.PutUint32(msg[0:], h.Len)
	binary.NativeEndian.PutUint16(msg[4:], h.Type)
	binary.NativeEndian.PutUint16(msg[6:], h.Flags)
	binary.NativeEndian.PutUint32(msg[8:], h.Seq)
	msg = append(msg, body...)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("conntrack: send: %w", err)
	}
	return c.receive()
}

func (c *Conn) receive() ([][]byte, error) {
	var out [][]byte
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("conntrack: receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("conntrack: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != c.seq {
				continue // the answer to a request given up on
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("conntrack: short error message")
				}
				errno := -int32(binary.NativeEndian.Uint32(m.Data))
				switch errno {
				case 0:
					return out, nil
				case int32(unix.ENOENT):
					return nil, ErrNotFound
				}
				return nil, fmt.Errorf("conntrack: %w", unix.Errno(errno))
			case unix.NLMSG_DONE:
				return out, nil
			default:
				// A GET's one answer (flagged NLM_F_MULTI, with no
				// NLMSG_DONE after it); nothing here dumps.
				return append(out, m.Data), nil
			}
		}
	}
}
