package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/testbed"
)

// fairFlows: how many flows the sprayer sprays (the 100 k).
const fairFlows = 100_000

// slowCounter counts a port's datagrams that take the slow path through a
// host's bridge (the fast path skips it): an nft counter in the bridge
// family's forward hook, which the fast path's ruleset check accepts.
func slowCounter(t *testing.T, ns string, port uint16) func() uint64 {
	t.Helper()
	rules := fmt.Sprintf("nft add table bridge fair; nft add chain bridge fair fw '{ type filter hook forward priority 0; }'; nft add rule bridge fair fw udp dport %d counter", port)
	if out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", rules).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", rules, err, out)
	}
	re := regexp.MustCompile(`counter packets (\d+)`)
	return func() uint64 {
		out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "chain", "bridge", "fair", "fw").CombinedOutput()
		m := re.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("read the counter in %s: %v\n%s", ns, err, out)
		}
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		return n
	}
}

// spray sends UDP datagrams of fairFlows flows (source ports by dport)
// from container c to dst until ctx ends (at least one of each); with
// fresh, each from a source MAC of its own, as any container may (Docker
// gives its containers CAP_NET_RAW): every frame teaches the bridges a new
// FDB entry.
// It sends from CPU 1, where the frames' way through both hosts runs too,
// so that the victim's sender on CPU 0 is not starved. It returns how
// many it sent.
func spray(ctx context.Context, t *testing.T, c testbed.Container, dst testbed.Container, fresh bool) int {
	t.Helper()
	runtime.LockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	one.Set(1)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		}
	}()
	var (
		fd       int
		src, dmc net.HardwareAddr
		ifindex  int
	)
	err := netns.Do(dst.Netns, func() error {
		i, err := net.InterfaceByName(dst.Dev)
		if err == nil {
			dmc = i.HardwareAddr
		}
		return err
	})
	if err == nil {
		err = netns.Do(c.Netns, func() error {
			i, err := net.InterfaceByName(c.Dev)
			if err != nil {
				return err
			}
			src, ifindex = i.HardwareAddr, i.Index
			fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			return err
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
	copy(to.Addr[:], dmc)
	frame := make([]byte, 14+20+8+18)
	copy(frame, dmc)
	binary.BigEndian.PutUint16(frame[12:], unix.ETH_P_IP)
	ip := frame[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(frame)-14))
	s, d := netip.MustParseAddr(c.Addr).As4(), netip.MustParseAddr(dst.Addr).As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipSum(ip))
	binary.BigEndian.PutUint16(frame[38:], uint16(len(frame)-34))
	n := 0
	for ; n < fairFlows || ctx.Err() == nil; n++ {
		copy(frame[6:], src)
		if fresh {
			frame[6] = 0x02 // locally administered, unicast
			binary.BigEndian.PutUint32(frame[8:], uint32(n)+1)
		}
		binary.BigEndian.PutUint16(frame[34:], uint16(10000+n%(fairFlows/2)))
		binary.BigEndian.PutUint16(frame[36:], uint16(7600+n/(fairFlows/2)%2))
		for {
			err := unix.Sendto(fd, frame, 0, to)
			if err == nil {
				break
			}
			if err != unix.ENOBUFS && err != unix.EAGAIN {
				t.Fatalf("spray: %v", err)
			}
		}
	}
	return n
}

func ipSum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// TestFastPathFairness: one container sprays 100 k flows while another's
// cached flow keeps its hit rate: at least 99 % of its datagrams skip the
// slow path, on the sending host and on the receiving one. The sprayer
// holds no more than its share of the caches (its other flows stay on the
// slow path); sprayed each from a MAC of its own, what its frames make the
// bridges learn flushes the caches at most once a second.
func TestFastPathFairness(t *testing.T) {
	needFastPath(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft")
	}
	for i, c := range []struct {
		name  string
		fresh bool
	}{{"flows", false}, {"flows-and-macs", true}} {
		t.Run(c.name, func(t *testing.T) { fairRun(t, fmt.Sprintf("fair%d", i), c.fresh) })
	}
}

func fairRun(t *testing.T, tag string, fresh bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tb := ibed(t, tag, "docker", 2)
	warm(t, tb)
	const port = 7501
	var slow []func() uint64
	for _, h := range tb.Hosts {
		slow = append(slow, slowCounter(t, h.Netns, port))
	}
	as := fastAgents(ctx, t, tb, "fastpath")
	victim, sprayer := tb.Hosts[0].Containers[0], tb.Hosts[0].Containers[1]
	dst := netip.MustParseAddr(tb.Hosts[1].Containers[0].Addr)
	rx := countUDP(t, tb.Hosts[1].Containers[0].Netns, dst, port)
	sendCtx, stopSend := context.WithCancel(ctx)
	defer stopSend()
	go seqcheck.Send(sendCtx, seqcheck.SendOptions{Netns: victim.Netns, Dst: dst, Port: port, Flows: 1,
		PktsPerFlow: 1 << 28, Size: 64, CPU: 0, Pause: 100 * time.Microsecond})
	time.Sleep(1500 * time.Millisecond) // cached both ways

	rx0, slow0, slow1 := rx.n.Load(), slow[0](), slow[1]()
	sprayCtx, stopSpray := context.WithTimeout(ctx, 3*time.Second)
	start := time.Now()
	sent := spray(sprayCtx, t, sprayer, tb.Hosts[1].Containers[1], fresh)
	took := time.Since(start)
	stopSpray()
	time.Sleep(200 * time.Millisecond)
	got := rx.n.Load() - rx0
	s0, s1 := slow[0]()-slow0, slow[1]()-slow1
	stopSend()

	in, eg := fastReportOf(t, as[1]), fastReportOf(t, as[0])
	t.Logf("sprayed %d frames of %d flows in %v; the victim's flow: %d datagrams, %d slow on the sender, %d on the receiver",
		sent, fairFlows, took.Round(time.Millisecond), got, s0, s1)
	for i, r := range []*FastReport{eg, in} {
		t.Logf("host %d: %d invalidations (%d by learned entries, %d announcements waited); over share: %d pending, %d entries; %d ingress, %d egress entries",
			i, r.Invalidations, r.LearnedFlushes, r.LearnedWaited, r.Counters["over_share_pending"], r.Counters["over_share_entry"],
			r.IngressEntries, r.EgressEntries)
	}
	if got < 500 {
		t.Fatalf("the victim's flow delivered %d datagrams during the spray, too few to judge", got)
	}
	for i, s := range []uint64{s0, s1} {
		if hit := 1 - float64(s)/float64(got); hit < 0.99 {
			t.Errorf("host %d: the victim's flow took the fast path for %.2f %% of its datagrams, want at least 99 %%", i, 100*hit)
		}
	}
	// The sprayer's entries and the victim's one, give or take what CPUs
	// admit at the same instant.
	most := int(eg.ShareContainer) + 1 + runtime.NumCPU()
	if eg.EgressEntries > most || in.IngressEntries > most {
		t.Errorf("%d egress entries on the sender, %d ingress entries on the receiver: the sprayer holds more than its share (%d)",
			eg.EgressEntries, in.IngressEntries, eg.ShareContainer)
	}
}
