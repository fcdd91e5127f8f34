package xdpsend

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// Probe checks that this kernel can run the kernel sender: a frame sent in
// live-frame mode out of dev (a veth in namespace ns) arrives at its peer
// (peer, same namespace). It changes only the two devices, whose GRO it
// puts back.
func Probe(ns, dev, peer string) error {
	undo, err := ReceiverNAPI(ns, peer)
	if err != nil {
		return err
	}
	defer undo()
	tpl, err := ParseFrame(probeFrame(), 9)
	if err != nil {
		return err
	}
	s, err := Load(Options{Netns: ns, Dev: dev, CPU: -1, Templates: []Template{tpl}, Flows: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	rx := func() (uint64, error) {
		var n uint64
		err := netns.Do(ns, func() error {
			l, err := netlink.LinkByName(peer)
			if err != nil {
				return err
			}
			n = l.Attrs().Statistics.RxPackets
			return nil
		})
		return n, err
	}
	before, err := rx()
	if err != nil {
		return err
	}
	sent, err := s.Run(context.Background()) // Duration 0: one call of FirstBatch frames
	if err != nil {
		return err
	}
	after, err := rx()
	if err != nil {
		return err
	}
	// A burst overflows the peer's ring (256 frames) in part: one frame
	// through is the proof.
	if after == before {
		return fmt.Errorf("sent %d frames out of %s, %s received none", sent, dev, peer)
	}
	return nil
}

// probeFrame is a minimal IPv4 UDP frame to port 9 from port 9 (the peer
// drops it once counted).
func probeFrame() []byte {
	f := make([]byte, 14+20+8+18)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 9)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	return f
}

// LiveFrames says whether this kernel runs XDP programs in live-frame mode
// (Linux 5.18), which the sender needs: one frame a trivial program drops,
// run on the loopback device. Sandbox kernels may refuse it (EPERM). It
// changes nothing.
func LiveFrames() error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}}) // XDP_DROP
	if err != nil {
		return err
	}
	defer prog.Close()
	_, err = prog.Run(&ebpf.RunOptions{Data: make([]byte, 64), Repeat: 1, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		Context: xdpMD{DataEnd: 64, IngressIfindex: 1}})
	if err != nil {
		return fmt.Errorf("XDP live frames: %w (Linux 5.18 or later; some sandbox kernels refuse them)", err)
	}
	return nil
}
