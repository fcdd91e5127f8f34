//go:build ignore

// floor is the least any veth-based fast path can do between two
// containers on two hosts: tc ingress programs that only rewrite the
// Ethernet header and redirect, with no encapsulation, no cache and no
// checks. The sender's program (on the container's host-side veth) sends
// the packet out of its host's NIC; the receiver's (on the NIC) hands it
// to the container with bpf_redirect_peer, as falcon's fast path does.
// With -vxlan PORT:VNI the packets cross the wire in the overlay's
// VXLAN headers (a template written in front, the outer UDP checksum
// zero; taken off with the flags falcon's decapsulation uses): the least
// an overlay's fast path can do. It runs until SIGINT or SIGTERM and
// detaches then.
//
// usage: go run floor.go [-vxlan PORT:VNI] HOST_A CONT_A HOST_B CONT_B   (as root)
// Each CONT is a namespace whose eth0 is a veth with its peer in HOST;
// each HOST reaches the other by its eth0. The containers may be the
// overlay's own: the programs take their packets before the bridge.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

type side struct {
	host           string
	nic, fl0, eth0 *net.Interface // nic and eth0's peer (fl0) in host; eth0 in cont
	addr, wire     net.IP         // cont's eth0, host's nic
}

// The bpf_skb_adjust_room flags (include/uapi/linux/bpf.h).
const (
	roomMAC     = 1
	fixedGSO    = 1 << 0
	encapIPv4   = 1 << 1
	encapUDP    = 1 << 4
	noCsumReset = 1 << 5
	encapEth    = 1 << 6
	decapIPv4   = 1 << 7
	csumDec     = 2 // BPF_CSUM_LEVEL_DEC
	outerLen    = 50
)

var le = binary.LittleEndian // the stack words as the CPU stores them

func main() {
	vx := flag.String("vxlan", "", "PORT:VNI: carry the packets in VXLAN headers")
	flag.Parse()
	if flag.NArg() != 4 {
		fmt.Fprintln(os.Stderr, "usage: floor [-vxlan PORT:VNI] HOST_A CONT_A HOST_B CONT_B")
		os.Exit(2)
	}
	var port, vni int
	if *vx != "" {
		if _, err := fmt.Sscanf(*vx, "%d:%d", &port, &vni); err != nil || port <= 0 || port > 65535 || vni < 0 || vni >= 1<<24 {
			check(fmt.Errorf("-vxlan %q: want PORT:VNI", *vx))
		}
	}
	runtime.LockOSThread() // the namespace is the thread's
	a, b := look(flag.Arg(0), flag.Arg(1)), look(flag.Arg(2), flag.Arg(3))
	var links []link.Link
	for _, p := range [][2]*side{{a, b}, {b, a}} {
		from, to := p[0], p[1]
		// from's container to to's: out of from's NIC, into to's container.
		out, in := plainOut(from, to), plainIn(to)
		if port != 0 {
			out, in = encapOut(from, to, port, vni), decapIn(to)
		}
		links = append(links, attach(from.host, from.fl0, out), attach(to.host, to.nic, in))
	}
	fmt.Println("attached")
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	<-c
	for _, l := range links {
		l.Close()
	}
}

func look(host, cont string) *side {
	s := &side{host: host}
	enter(cont)
	s.eth0 = iface("eth0")
	s.addr = ipv4(s.eth0)
	l, err := netlink.LinkByIndex(s.eth0.Index)
	check(err)
	enter(host)
	s.nic = iface("eth0")
	s.wire = ipv4(s.nic)
	s.fl0, err = net.InterfaceByIndex(l.Attrs().ParentIndex) // the veth's peer
	check(err)
	return s
}

func ipv4(i *net.Interface) net.IP {
	addrs, err := i.Addrs()
	check(err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.To4()
		}
	}
	check(fmt.Errorf("%s has no IPv4 address", i.Name))
	return nil
}

func enter(name string) {
	ns, err := netns.GetFromName(name)
	check(err)
	check(netns.Set(ns))
	ns.Close()
}

func iface(name string) *net.Interface {
	i, err := net.InterfaceByName(name)
	check(err)
	return i
}

func attach(host string, dev *net.Interface, p *ebpf.Program) link.Link {
	enter(host)
	l, err := link.AttachTCX(link.TCXOptions{Interface: dev.Index, Program: p, Attach: ebpf.AttachTCXIngress})
	check(err)
	return l
}

// match: an IPv4 frame (ethertype at 12) whose IPv4 destination at off is
// dst goes on; anything else to "next". R6 holds the skb.
func match(off int32, dst net.IP) asm.Instructions {
	load := func(at, n int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, at), asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -8),
			asm.Mov.Imm(asm.R4, n), asm.FnSkbLoadBytes.Call(), asm.JNE.Imm(asm.R0, 0, "next"),
		}
	}
	return append(append(append(asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}, load(12, 2)...),
		asm.LoadMem(asm.R1, asm.RFP, -8, asm.Half), asm.JNE.Imm32(asm.R1, int32(le.Uint16([]byte{0x08, 0x00})), "next")),
		append(load(off, 4), asm.LoadMem(asm.R1, asm.RFP, -8, asm.Word), asm.JNE.Imm32(asm.R1, int32(le.Uint32(dst)), "next"))...)
}

// macs writes dmac and smac at the packet's start.
func macs(dmac, smac net.HardwareAddr) asm.Instructions {
	var m [12]byte
	copy(m[:6], dmac)
	copy(m[6:], smac)
	return asm.Instructions{
		asm.StoreImm(asm.RFP, -24, int64(int32(le.Uint32(m[0:4]))), asm.Word),
		asm.StoreImm(asm.RFP, -20, int64(int32(le.Uint32(m[4:8]))), asm.Word),
		asm.StoreImm(asm.RFP, -16, int64(int32(le.Uint32(m[8:12]))), asm.Word),
		asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, 0), asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -24),
		asm.Mov.Imm(asm.R4, 12), asm.Mov.Imm(asm.R5, 0), asm.FnSkbStoreBytes.Call(), asm.JNE.Imm(asm.R0, 0, "drop"),
	}
}

// room calls bpf_skb_adjust_room(skb, delta, BPF_ADJ_ROOM_MAC, flags).
func room(delta int32, flags uint64) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, delta), asm.Mov.Imm(asm.R3, roomMAC),
		asm.LoadImm(asm.R4, int64(flags), asm.DWord), asm.FnSkbAdjustRoom.Call(), asm.JNE.Imm(asm.R0, 0, "next"),
	}
}

// finish: redirect (to ifindex's peer with peer), and the exits.
func finish(ifindex int, peer bool, body asm.Instructions) *ebpf.Program {
	fn := asm.FnRedirect
	if peer {
		fn = asm.FnRedirectPeer
	}
	insns := append(body, asm.Mov.Imm(asm.R1, int32(ifindex)), asm.Mov.Imm(asm.R2, 0), fn.Call(), asm.Return(),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("drop"), asm.Return(), // TC_ACT_SHOT: a packet half rewritten
		asm.Mov.Imm(asm.R0, -1).WithSymbol("next"), asm.Return()) // TCX_NEXT
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: insns})
	check(err)
	return p
}

// plainOut: from's container to to's, a new Ethernet header and out of
// from's NIC.
func plainOut(from, to *side) *ebpf.Program {
	return finish(from.nic.Index, false, append(match(30, to.addr), macs(to.nic.HardwareAddr, from.nic.HardwareAddr)...))
}

// plainIn: at to's NIC, into its container.
func plainIn(to *side) *ebpf.Program {
	return finish(to.fl0.Index, true, append(match(30, to.addr), macs(to.eth0.HardwareAddr, to.fl0.HardwareAddr)...))
}

// encapOut: from's container to to's in VXLAN: room for the outer
// headers, a template with the lengths and the header checksum of this
// packet, out of from's NIC.
func encapOut(from, to *side, port, vni int) *ebpf.Program {
	var t [64]byte // outer Ethernet, IPv4, UDP, VXLAN; the inner Ethernet
	copy(t[0:], to.nic.HardwareAddr)
	copy(t[6:], from.nic.HardwareAddr)
	t[12], t[14], t[20], t[22], t[23] = 0x08, 0x45, 0x40, 64, 17 // IPv4, DF, TTL, UDP
	copy(t[26:], from.wire)
	copy(t[30:], to.wire)
	binary.BigEndian.PutUint16(t[34:], 49152)
	binary.BigEndian.PutUint16(t[36:], uint16(port))
	t[42] = 0x08 // a VNI follows
	binary.BigEndian.PutUint32(t[46:], uint32(vni)<<8)
	copy(t[50:], to.eth0.HardwareAddr)
	copy(t[56:], to.fl0.HardwareAddr)
	t[62] = 0x08
	body := append(match(30, to.addr), room(outerLen, fixedGSO|encapIPv4|encapUDP|encapEth|14<<56)...)
	for i := 0; i < 64; i += 8 {
		body = append(body, asm.LoadImm(asm.R1, int64(le.Uint64(t[i:])), asm.DWord), asm.StoreMem(asm.RFP, int16(i-64), asm.R1, asm.DWord))
	}
	length := func(at int16, minus int32) asm.Instructions { // skb->len less minus, big-endian, at t[at]
		return asm.Instructions{asm.LoadMem(asm.R1, asm.R6, 0, asm.Word), asm.Sub.Imm(asm.R1, minus),
			asm.HostTo(asm.BE, asm.R1, asm.Half), asm.StoreMem(asm.RFP, at-64, asm.R1, asm.Half)}
	}
	body = append(body, length(16, 14)...)
	body = append(body, length(38, 34)...)
	body = append(body, // the IPv4 header checksum: bpf_csum_diff over it, folded
		asm.Mov.Imm(asm.R1, 0), asm.Mov.Imm(asm.R2, 0), asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, 14-64),
		asm.Mov.Imm(asm.R4, 20), asm.Mov.Imm(asm.R5, 0), asm.FnCsumDiff.Call(),
		asm.Mov.Reg(asm.R1, asm.R0), asm.And.Imm(asm.R1, 0xffff), asm.RSh.Imm(asm.R0, 16), asm.Add.Reg(asm.R0, asm.R1),
		asm.Mov.Reg(asm.R1, asm.R0), asm.And.Imm(asm.R1, 0xffff), asm.RSh.Imm(asm.R0, 16), asm.Add.Reg(asm.R0, asm.R1),
		asm.Xor.Imm(asm.R0, 0xffff), asm.StoreMem(asm.RFP, 24-64, asm.R0, asm.Half),
		asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, 0), asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -64),
		asm.Mov.Imm(asm.R4, 64), asm.Mov.Imm(asm.R5, 0), asm.FnSkbStoreBytes.Call(), asm.JNE.Imm(asm.R0, 0, "drop"))
	return finish(from.nic.Index, false, body)
}

// decapIn: at to's NIC, a VXLAN packet for its container loses the outer
// headers (falcon's flags: FIXED_GSO, the checksum levels kept less the
// outer UDP's), gets a new Ethernet header and goes into the container.
func decapIn(to *side) *ebpf.Program {
	body := append(match(outerLen+30, to.addr), room(-outerLen, fixedGSO|noCsumReset|decapIPv4)...)
	body = append(body, asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, csumDec), asm.FnCsumLevel.Call())
	return finish(to.fl0.Index, true, append(body, macs(to.eth0.HardwareAddr, to.fl0.HardwareAddr)...))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}
