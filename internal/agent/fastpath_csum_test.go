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
// path and once to a cached flow.
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
	// try injects one frame, checks what reached the socket and says
	// whether the fast path carried it.
	try := func(as []*Agent, corrupt bool) bool {
		t.Helper()
		n, errs, hits := rx.n.Load(), csumErrors(t, servers[0].Netns), ingressHits(t, as)
		inj.send(corrupt)
		time.Sleep(200 * time.Millisecond)
		dn, derrs, dhits := rx.n.Load()-n, csumErrors(t, servers[0].Netns)-errs, ingressHits(t, as)-hits
		t.Logf("corrupt %v, agents %d: %d delivered, %d checksum errors, %d by the fast path", corrupt, len(as), dn, derrs, dhits)
		switch {
		case corrupt && (dn != 0 || derrs != 1):
			t.Errorf("a corrupt datagram: %d delivered, %d checksum errors; want 0 and 1", dn, derrs)
		case !corrupt && dn != 1:
			t.Errorf("a good datagram: %d delivered, want 1", dn)
		}
		return dhits == 1
	}
	try(nil, false)
	try(nil, true)

	// A cache invalidation (the agent's, on any event) can send a frame
	// the slow way: the flow is learned again before each try.
	as := fastAgents(ctx, t, tb, "fastpath")
	for _, corrupt := range []bool{false, true} {
		fast := false
		for i := 0; i < 5 && !fast && !t.Failed(); i++ {
			learn(t, src, dst, clients[0].Netns, as)
			fast = try(as, corrupt)
		}
		if !fast {
			t.Errorf("the fast path carried none of 5 frames (corrupt %v)", corrupt)
		}
	}
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
