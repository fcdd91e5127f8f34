package agent

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// walkAttrs calls fn for each netlink attribute in b (nfacct's and
// nftables' replies), its type without the nested and byte-order flags;
// it stops at a malformed one. internal/conntrack has its own: a package
// of one function more is what this package's import limit forbids.
func walkAttrs(b []byte, fn func(typ uint16, val []byte)) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		if l < 4 || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER), b[4:l])
		l = (l + 3) &^ 3
		if l > len(b) {
			return
		}
		b = b[l:]
	}
}

// nlSocket opens a netlink socket of protocol in the calling thread's
// namespace, where it stays whatever the thread does later. Replies wait
// at most a second: a reader holds f.mu.
func nlSocket(protocol int) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, protocol)
	if err != nil {
		return -1, err
	}
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// nlBufs hold receive buffers: larger than any one reply the kernel
// builds for a dump (it fills at most a page, or the largest buffer a
// socket has read with), and kept, not made anew a dump a second.
var nlBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// nlDump asks socket fd for a dump of typ (body: the request's fixed
// header) and returns each reply's payload. A dump the kernel marks
// interrupted by a change is an error: its parts may disagree. Replies to
// an earlier request (seq) are skipped.
func nlDump(fd int, seq uint32, typ uint16, body []byte) ([][]byte, error) {
	req := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(req[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(req[4:], typ)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	if err := unix.Sendto(fd, append(req, body...), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out [][]byte
	bp := nlBufs.Get().(*[]byte)
	defer nlBufs.Put(bp)
	buf := *bp
	for {
		n, _, flags, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err != nil {
			return nil, err
		}
		if flags&unix.MSG_TRUNC != 0 {
			return nil, errors.New("netlink reply longer than the buffer")
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch {
			case m.Header.Seq != seq:
				continue
			case m.Header.Flags&unix.NLM_F_DUMP_INTR != 0:
				return nil, errors.New("netlink dump interrupted by a change")
			case m.Header.Type == unix.NLMSG_DONE:
				return out, nil
			case m.Header.Type == unix.NLMSG_ERROR:
				if err := nlError(m.Data); err != nil {
					return nil, err
				}
				return out, nil
			}
			out = append(out, slices.Clone(m.Data)) // buf is read into again
		}
	}
}

// nlError is the error an NLMSG_ERROR message's payload carries; nil for
// an acknowledgement.
func nlError(data []byte) error {
	if len(data) >= 4 {
		if e := int32(binary.NativeEndian.Uint32(data)); e != 0 {
			return syscall.Errno(-e)
		}
	}
	return nil
}
