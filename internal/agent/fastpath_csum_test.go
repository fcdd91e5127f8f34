package agent

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/testbed"
)

// TestFastPathChecksumLevel: a VXLAN packet with a zero outer UDP checksum
// comes up the receiving wire "checksum unnecessary" at level 0: the
// wire's GRO counts the zero checksum as one verified, as a NIC does. The
// kernel takes that level off at the outer UDP, so the inner checksum is
// still verified and a corrupt datagram dropped. The fast path's
// decapsulation must not pass the level on to the inner packet
// (bpf_skb_adjust_room drops the mark unless told
// BPF_F_ADJ_ROOM_NO_CSUM_RESET; with that flag alone this test fails).
// Frames with a zero outer checksum are written onto the sending wire, a
// good one and one with a byte of its payload changed, once to the slow
// path and once to a cached flow. The container must see each frame with
// the checksum state the slow path gives it: the inner checksum verified
// (level 0) for the good one, unverified for the corrupt one.
func TestFastPathChecksumLevel(t *testing.T) {
	needFastPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := ibed(t, "fcl", "docker", 1)
	warm(t, tb)
	clients, servers := tb.Endpoints()
	src := netip.AddrPortFrom(netip.MustParseAddr(clients[0].Addr), 7702)
	dst := netip.AddrPortFrom(netip.MustParseAddr(servers[0].Addr), 7701)
	rx := countUDP(t, servers[0].Netns, dst.Addr(), dst.Port())
	inj := newInjector(t, tb, clients[0], servers[0], src, dst)
	probe := levelProbe(t, servers[0], len(inj.frame)-50)
	// try injects one frame, checks what reached the socket and says
	// whether the fast path carried it and what checksum level the
	// container saw (-1: none verified).
	try := func(as []*Agent, corrupt bool) (bool, int64) {
		t.Helper()
		n, errs, hits := rx.n.Load(), csumErrors(t, servers[0].Netns), ingressHits(t, as)
		probe.reset(t)
		inj.send(corrupt)
		time.Sleep(200 * time.Millisecond)
		dn, derrs, dhits := rx.n.Load()-n, csumErrors(t, servers[0].Netns)-errs, ingressHits(t, as)-hits
		level := probe.read(t)
		t.Logf("corrupt %v, agents %d: %d delivered, %d checksum errors, %d by the fast path, level %d", corrupt, len(as), dn, derrs, dhits, level)
		switch {
		case corrupt && (dn != 0 || derrs != 1):
			t.Errorf("a corrupt datagram: %d delivered, %d checksum errors; want 0 and 1", dn, derrs)
		case !corrupt && dn != 1:
			t.Errorf("a good datagram: %d delivered, want 1", dn)
		}
		return dhits == 1, level
	}
	var slow [2]int64
	_, slow[0] = try(nil, false)
	_, slow[1] = try(nil, true)
	if slow[0] != 0 || slow[1] != -1 {
		t.Errorf("the slow path gave the container checksum levels %d and %d, want 0 (good) and -1 (corrupt)", slow[0], slow[1])
	}

	// A cache invalidation (the agent's, on any event) can send a frame
	// the slow way: the flow is learned again before each try.
	as := fastAgents(ctx, t, tb, "fastpath")
	for i, corrupt := range []bool{false, true} {
		fast, level := false, int64(0)
		for n := 0; n < 5 && !fast; n++ {
			learn(t, src, dst, clients[0].Netns, as)
			fast, level = try(as, corrupt)
		}
		switch {
		case !fast:
			t.Errorf("the fast path carried none of 5 frames (corrupt %v)", corrupt)
		case level != slow[i]:
			t.Errorf("corrupt %v: the container saw checksum level %d from the fast path, %d from the slow", corrupt, level, slow[i])
		}
	}
}

// probe records the checksum level a container's device hands up with
// the last packet of one length (-1: not "checksum unnecessary").
type probe struct{ m *ebpf.Map }

// levelProbe attaches a probe for frames of size bytes at e's device.
func levelProbe(t *testing.T, e testbed.Endpoint, size int) *probe {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // __sk_buff.len
		asm.JNE.Imm(asm.R2, int32(size), "out"),
		asm.Mov.Imm(asm.R2, 0), // BPF_CSUM_LEVEL_QUERY
		asm.FnCsumLevel.Call(),
		asm.StoreMem(asm.RFP, -16, asm.R0, asm.DWord),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -16),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(asm.R0, -1).WithSymbol("out"), // TCX_NEXT
		asm.Return(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	var l link.Link
	err = netns.Do(e.Netns, func() error {
		i, err := net.InterfaceByName(e.Dev)
		if err == nil {
			l, err = link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &probe{m: m}
}

const noLevel = 99

func (p *probe) reset(t *testing.T) {
	if err := p.m.Put(uint32(0), int64(noLevel)); err != nil {
		t.Fatal(err)
	}
}

// read: the level, -1 for none, noLevel when no frame came.
func (p *probe) read(t *testing.T) int64 {
	var v int64
	if err := p.m.Lookup(uint32(0), &v); err != nil {
		t.Fatal(err)
	}
	if v < 0 {
		return -1
	}
	return v
}

// learn sends datagrams of src -> dst until the receiving host's fast path
// has carried some.
func learn(t *testing.T, src, dst netip.AddrPort, ns string, as []*Agent) {
	t.Helper()
	var c *net.UDPConn
	err := netns.Do(ns, func() error {
		var err error
		c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(src), net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hits := ingressHits(t, as)
	for end := time.Now().Add(10 * time.Second); ingressHits(t, as) < hits+10; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the fast path carried nothing of %v -> %v in 10 s", src, dst)
		}
		c.Write([]byte("learn"))
	}
}

func ingressHits(t *testing.T, as []*Agent) uint64 {
	if len(as) == 0 {
		return 0
	}
	return fastReportOf(t, as[1]).Counters["ingress_hit"]
}

var inCsumErrors = regexp.MustCompile(`(?m)^Udp: \d+ \d+ \d+ \d+ \d+ \d+ (\d+)`)

// csumErrors reads UDP's InCsumErrors in ns.
func csumErrors(t *testing.T, ns string) int {
	t.Helper()
	m := inCsumErrors.FindStringSubmatch(nsSh(t, ns, "grep '^Udp: [0-9]' /proc/net/snmp"))
	if m == nil {
		t.Fatalf("no Udp counters in %s", ns)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// injector writes VXLAN frames of one inner flow onto the sending host's
// wire, with a zero outer UDP checksum.
type injector struct {
	fd    int
	to    unix.SockaddrLinklayer
	frame []byte
}

func newInjector(t *testing.T, tb *testbed.Testbed, c, s testbed.Endpoint, src, dst netip.AddrPort) *injector {
	t.Helper()
	a, b := tb.Hosts[0], tb.Hosts[1]
	mac := func(ns, dev string) net.HardwareAddr {
		var hw net.HardwareAddr
		if err := netns.Do(ns, func() error {
			i, err := net.InterfaceByName(dev)
			if err == nil {
				hw = i.HardwareAddr
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return hw
	}
	inner := udpFrame(mac(c.Netns, c.Dev), mac(s.Netns, s.Dev), src, dst, []byte("falcon-csum-lvl!") /* even: ipSum sums whole words */)
	outer := udpFrame(mac(a.Netns, a.NIC), mac(b.Netns, b.NIC),
		netip.AddrPortFrom(netip.MustParseAddr(a.Addr), 40000), netip.AddrPortFrom(netip.MustParseAddr(b.Addr), uint16(b.Port)),
		append([]byte{0x08, 0, 0, 0, byte(b.VNI >> 16), byte(b.VNI >> 8), byte(b.VNI), 0}, inner...))
	binary.BigEndian.PutUint16(outer[40:], 0) // no outer checksum
	in := &injector{frame: outer}
	copy(in.to.Addr[:], outer[:6])
	in.to.Halen = 6
	err := netns.Do(a.Netns, func() error {
		i, err := net.InterfaceByName(a.NIC)
		if err != nil {
			return err
		}
		in.to.Ifindex = i.Index
		in.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(in.fd) })
	return in
}

// send writes the frame, a byte of its inner payload changed if corrupt.
func (in *injector) send(corrupt bool) {
	f := append([]byte(nil), in.frame...)
	if corrupt {
		f[50+42] ^= 0x55
	}
	unix.Sendto(in.fd, f, 0, &in.to)
}

// udpFrame is an Ethernet frame of an IPv4 UDP datagram with right
// checksums.
func udpFrame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) []byte {
	f := make([]byte, 42+len(payload))
	copy(f, dstMAC)
	copy(f[6:], srcMAC)
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip, udp := f[14:34], f[34:]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipSum(ip))
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, unix.IPPROTO_UDP, byte(len(udp)>>8), byte(len(udp)))
	sum := ipSum(append(pseudo, udp...))
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], sum)
	return f
}
