package seqcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// Stats is what one flow's receiver saw.
type Stats struct {
	Index      uint32 // the flow's index at the sender
	Total      uint64 // packets the sender sent in this flow
	Received   uint64 // distinct sequence numbers that arrived
	Reordered  uint64 // arrivals below the highest number already seen
	Duplicates uint64
	Lost       uint64 // Total - Received
	// When the first few reordered arrivals came (at most maxReorderTimes),
	// to line them up with what else happened then (an agent's restart).
	ReorderedAt []time.Time
}

const maxReorderTimes = 8

// Receiver is a UDP socket in some namespace that checks sequenced flows.
type Receiver struct {
	conn *net.UDPConn
}

// Listen binds a receiver to addr:port (port 0 picks one, see Addr) in
// namespace ns, so a sender may start as soon as it returns.
func Listen(ns string, addr netip.Addr, port uint16) (*Receiver, error) {
	if !addr.IsValid() {
		return nil, errors.New("no address to listen on")
	}
	var r Receiver
	err := netns.Do(ns, func() error {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		if err != nil {
			return err
		}
		r.conn = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s port %d in namespace %q: %w", addr, port, ns, err)
	}
	// A deep buffer keeps the receiving application's own pace out of the
	// loss count; the forced variant passes rmem_max (root only).
	if raw, err := r.conn.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
			}
		})
	}
	return &r, nil
}

// Addr is the bound address.
func (r *Receiver) Addr() netip.AddrPort { return r.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close releases the socket.
func (r *Receiver) Close() error { return r.conn.Close() }

type flowState struct {
	Stats
	max  uint64
	any  bool
	seen []uint64 // bitset of sequence numbers
}

// DefaultIdle is how long Wait waits after the last datagram before it
// decides the rest was lost.
const DefaultIdle = time.Second

// Wait reads until every flow announced by the sender is complete, until
// no datagram came for idle (0: DefaultIdle) after the first one, or until
// ctx ends; it returns what each flow (by the sender's address) saw. Only
// a ctx that ends before any datagram arrived is an error.
func (r *Receiver) Wait(ctx context.Context, idle time.Duration) (map[netip.AddrPort]Stats, error) {
	if idle <= 0 {
		idle = DefaultIdle
	}
	flows := map[netip.AddrPort]*flowState{}
	var announced uint32
	complete := 0
	buf := make([]byte, 65536)
	for announced == 0 || complete < int(announced) {
		deadline := time.Now().Add(idle)
		if len(flows) == 0 {
			deadline = time.Now().Add(100 * time.Millisecond) // only to look at ctx
		}
		r.conn.SetReadDeadline(deadline)
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if ctx.Err() != nil {
			if len(flows) == 0 {
				return nil, fmt.Errorf("no sequenced datagram arrived: %w", ctx.Err())
			}
			break
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if len(flows) == 0 {
				continue
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("receive: %w", err)
		}
		h, err := parse(buf[:n])
		if err != nil {
			continue // someone else's datagram
		}
		f := flows[from]
		if f == nil {
			f = &flowState{Stats: Stats{Index: h.index, Total: h.total},
				seen: make([]uint64, (h.total+63)/64)}
			flows[from] = f
			announced = max(announced, h.flows)
		}
		if h.total != f.Total {
			continue // a different run reusing the source port
		}
		w, bit := h.seq/64, uint64(1)<<(h.seq%64)
		if f.seen[w]&bit != 0 {
			f.Duplicates++
			continue
		}
		if f.any && h.seq < f.max {
			f.Reordered++
			if len(f.ReorderedAt) < maxReorderTimes {
				f.ReorderedAt = append(f.ReorderedAt, time.Now())
			}
		}
		if !f.any || h.seq > f.max {
			f.max, f.any = h.seq, true
		}
		f.seen[w] |= bit
		f.Received++
		if f.Received == f.Total {
			complete++
		}
	}
	out := make(map[netip.AddrPort]Stats, len(flows))
	for a, f := range flows {
		f.Lost = f.Total - f.Received
		out[a] = f.Stats
	}
	return out, nil
}

// RecvSeq listens on addr:port in namespace ns and waits as Wait does.
// The socket exists only once RecvSeq runs: a sender started at the same
// time may lose its first datagrams; use Listen and Wait to avoid that.
func RecvSeq(ctx context.Context, ns string, addr netip.Addr, port uint16) (map[netip.AddrPort]Stats, error) {
	r, err := Listen(ns, addr, port)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Wait(ctx, 0)
}
