package seqcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// SendOptions describe the flows to send. Each flow is its own UDP socket,
// so flows differ in source port; packets go round-robin over the flows.
type SendOptions struct {
	Netns       string     // sender's network namespace ("" = current)
	Dst         netip.Addr // receiver's address
	Port        uint16     // receiver's port
	Flows       int
	PktsPerFlow int
	Size        int // UDP payload bytes, at least HeaderLen
	// CPU pins the sending thread (and so the sender's softirqs) to one
	// CPU when ≥ 0; -1 leaves it to the scheduler.
	CPU int
	// Pause, when positive, stops sending for at least that long after
	// every PauseEvery rounds (a round is one datagram of each flow; 0
	// means 1), so that every flow has idle gaps, as paced senders have.
	Pause      time.Duration
	PauseEvery int
}

func (o SendOptions) validate() error {
	switch {
	case !o.Dst.IsValid():
		return errors.New("no destination address")
	case o.Port == 0:
		return errors.New("destination port 0")
	case o.Flows < 1 || o.Flows > 1<<16:
		return fmt.Errorf("%d flows: want 1..65536", o.Flows)
	case o.PktsPerFlow < 1 || o.PktsPerFlow > maxPerFlow:
		return fmt.Errorf("%d packets per flow: want 1..%d", o.PktsPerFlow, maxPerFlow)
	case o.Size < HeaderLen || o.Size > 65507:
		return fmt.Errorf("size %d: want %d..65507 bytes", o.Size, HeaderLen)
	case o.Pause < 0 || o.PauseEvery < 0:
		return fmt.Errorf("pause %v every %d rounds: want non-negative values", o.Pause, o.PauseEvery)
	case o.CPU >= runtime.NumCPU():
		return fmt.Errorf("CPU %d: this machine has %d", o.CPU, runtime.NumCPU())
	}
	return netns.Check(o.Netns)
}

// Send sends the flows o describes and returns once all are sent or ctx
// ends. Datagrams a full socket or device queue refuses are retried, so
// every number leaves the sender.
func Send(ctx context.Context, o SendOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	conns := make([]*net.UDPConn, 0, o.Flows)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(o.Dst, o.Port))
	// Sockets keep the namespace they were made in, so only their creation
	// needs to happen inside it.
	err := netns.Do(o.Netns, func() error {
		for range o.Flows {
			c, err := net.DialUDP("udp", nil, dst)
			if err != nil {
				return fmt.Errorf("udp socket to %s: %w", dst, err)
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		return err
	}

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if o.CPU >= 0 {
			var old, set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &old); err != nil {
				errc <- err
				return // thread stays locked and dies: no stray affinity
			}
			set.Set(o.CPU)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- fmt.Errorf("pin sender to CPU %d: %w", o.CPU, err)
				return
			}
			defer func() {
				if unix.SchedSetaffinity(0, &old) == nil {
					runtime.UnlockOSThread()
				}
			}()
		} else {
			defer runtime.UnlockOSThread()
		}
		errc <- send(ctx, conns, o)
	}()
	return <-errc
}

func send(ctx context.Context, conns []*net.UDPConn, o SendOptions) error {
	buf := make([]byte, o.Size)
	h := header{total: uint64(o.PktsPerFlow), flows: uint32(o.Flows)}
	every := max(o.PauseEvery, 1)
	for seq := range o.PktsPerFlow {
		if seq%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if o.Pause > 0 && seq > 0 && seq%every == 0 {
			time.Sleep(o.Pause)
		}
		h.seq = uint64(seq)
		for i, c := range conns {
			h.index = uint32(i)
			h.put(buf)
			for {
				_, err := c.Write(buf)
				if err == nil {
					break
				}
				// A full queue says "later", not "never"; an ICMP error from
				// a receiver not listening yet says the same.
				if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) &&
					!errors.Is(err, unix.ECONNREFUSED) {
					return fmt.Errorf("send flow %d packet %d: %w", i, seq, err)
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				runtime.Gosched()
			}
		}
	}
	return nil
}
