package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// ctInvalidDrop is what kube-proxy's and Calico's rules carry: packets
// conntrack finds INVALID are dropped, here counted. On the docker layout
// br_netfilter (bridge-nf-call-iptables) hands the bridged packets to the
// same hook.
const ctInvalidDrop = "nft add table inet fct; nft add chain inet fct fw '{ type filter hook forward priority 0; }'; nft add rule inet fct fw ct state invalid counter drop"

func nsSh(t *testing.T, ns, cmd string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("%s in %s: %v\n%s", cmd, ns, err, out)
	}
	return string(out)
}

// invalidDrops matches the counters of rules that drop conntrack-INVALID
// packets: the test's own and kube-proxy's (iptables-nft counts each rule).
var invalidDrops = regexp.MustCompile(`ct state invalid .*counter packets (\d+) .*drop`)

// dropped sums the packet counts that re's first group reads in ns's
// ruleset; no rule matching re fails the test.
func dropped(t *testing.T, ns string, re *regexp.Regexp) int {
	t.Helper()
	n := 0
	rs := nsSh(t, ns, "nft list ruleset")
	if !re.MatchString(rs) {
		t.Fatalf("no rule of %s matches %s:\n%s", ns, re, rs)
	}
	for _, m := range re.FindAllStringSubmatch(rs, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// invalidateEach invalidates the caches of every host of tb once a period, by
// turns a route, a neighbour and an nftables commit, until ctx ends.
func invalidateEach(ctx context.Context, tb *testbed.Testbed, period time.Duration) <-chan int {
	done := make(chan int, 1)
	go func() {
		n := 0
		for ctx.Err() == nil {
			for _, h := range tb.Hosts {
				cmd := [][]string{
					{"sh", "-c", "ip route add blackhole 198.51.100.0/24; ip route del blackhole 198.51.100.0/24"},
					{"sh", "-c", "ip neigh replace 198.51.100.7 lladdr 02:00:00:00:00:07 dev " + h.NIC + "; ip neigh del 198.51.100.7 dev " + h.NIC},
					{"sh", "-c", "nft add table inet fctx; nft delete table inet fctx"},
				}[n%3]
				exec.Command("ip", append([]string{"netns", "exec", h.Netns}, cmd...)...).Run()
			}
			n++
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
		done <- n
	}()
	return done
}

func ctSeconds(t *testing.T) time.Duration {
	if v := os.Getenv("FALCON_CT_SECONDS"); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s < 5 {
			t.Fatalf("FALCON_CT_SECONDS=%q: want at least 5", v)
		}
		return time.Duration(s) * time.Second
	}
	return 20 * time.Second
}

// TestFastPathConntrackTCP: with `ct state invalid drop` in both hosts'
// forward chains, one iperf3 TCP flow on the fast path survives an
// invalidation every second (routes, neighbours, nft commits): no second
// below half the median rate, and not one INVALID drop. Without the
// conntrack keeper the flow stalls for good (conntrack never saw the
// fast-pathed segments, and marks the next slow ones out of window).
// FALCON_CT_SECONDS sets the length (default 20 s; 60 for the evidence).
func TestFastPathConntrackTCP(t *testing.T) {
	needFastPath(t)
	if err := workload.CheckTools("iperf3", "nft"); err != nil {
		t.Skip(err)
	}
	// k8s: kube-proxy's own rules (KUBE-FORWARD drops INVALID).
	for i, layout := range []string{"docker", "calico", "k8s"} {
		t.Run(layout, func(t *testing.T) {
			d := ctSeconds(t)
			ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
			defer cancel()
			tb := ibed(t, fmt.Sprintf("ct%d", i), layout, 1)
			for _, h := range tb.Hosts {
				if layout != "k8s" {
					nsSh(t, h.Netns, ctInvalidDrop)
				}
			}
			warm(t, tb)
			as := fastAgents(ctx, t, tb, "fastpath")
			clients, servers := tb.Endpoints()
			srv, err := workload.StartIperf3IntervalServer(ctx, servers[0].Netns, 5331, nil, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			rx0, tx0 := tcpOrder(t, servers[0].Netns), tcpOrder(t, clients[0].Netns)
			stopChurn, cancelChurn := context.WithCancel(ctx)
			done := invalidateEach(stopChurn, tb, time.Second)
			res, err := workload.RunIperf3Series(ctx, workload.Iperf3Opts{Netns: clients[0].Netns, Addr: servers[0].Addr, Port: 5331, Duration: d}, time.Second)
			cancelChurn()
			churns := <-done
			if err != nil {
				t.Fatal(err)
			}
			rx, tx := tcpOrder(t, servers[0].Netns).minus(rx0), tcpOrder(t, clients[0].Netns).minus(tx0)
			var rates []float64
			for _, iv := range res.Steady() {
				rates = append(rates, iv.BitsPerSecond/1e9)
			}
			sorted := slices.Sorted(slices.Values(rates))
			median := sorted[len(sorted)/2]
			drops := dropped(t, tb.Hosts[0].Netns, invalidDrops) + dropped(t, tb.Hosts[1].Netns, invalidDrops)
			snd, rcv := fastReportOf(t, as[0]), fastReportOf(t, as[1])
			t.Logf("%s: %.2f Gbit/s median, per second %.2f; %d invalidation rounds; %d INVALID drops; sender: %d egress hits, conntrack %+v; receiver: %d egress hits, %d ingress hits, conntrack %+v; receiving socket %+v, sending %+v",
				layout, median, rates, churns, drops, snd.Counters["egress_hit"], *snd.Conntrack, rcv.Counters["egress_hit"], rcv.Counters["ingress_hit"], *rcv.Conntrack, rx, tx)
			// The stall this guards against is a rate of 0; the evidence run
			// (FALCON_CT_SECONDS, a machine to itself) holds every second
			// to half the median, the suite's, shared with other work, to a
			// quarter.
			floor := 4.0
			if os.Getenv("FALCON_CT_SECONDS") != "" {
				floor = 2
			}
			for s, r := range rates {
				if r < median/floor {
					t.Errorf("second %d: %.2f Gbit/s, below 1/%.0f of the median %.2f", s, r, floor, median)
				}
			}
			if drops != 0 {
				t.Errorf("%d packets dropped as conntrack-INVALID", drops)
			}
			if snd.Counters["egress_hit"] == 0 || snd.Conntrack.Kept == 0 {
				t.Errorf("the fast path did not carry the flow: %v, conntrack %+v", snd.Counters, *snd.Conntrack)
			}
			if churns < int(d/time.Second)/2 {
				t.Errorf("only %d invalidation rounds in %v", churns, d)
			}
		})
	}
}

// udpEcho echoes every datagram on addr:port in ns until the test ends.
func udpEcho(t *testing.T, ns string, addr netip.Addr, port uint16) {
	t.Helper()
	var c *net.UDPConn
	err := netns.Do(ns, func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}

// udpPinger sends a datagram every period from ns to dst until ctx ends,
// counting the echoes.
func udpPinger(ctx context.Context, t *testing.T, ns string, dst netip.AddrPort, period time.Duration) *atomic.Int64 {
	t.Helper()
	var c *net.UDPConn
	err := netns.Do(ns, func() error {
		var err error
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var echoes atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			echoes.Add(1)
		}
	}()
	go func() {
		defer c.Close()
		for ctx.Err() == nil {
			c.Write(make([]byte, 64))
			time.Sleep(period)
		}
	}()
	return &echoes
}

// TestFastPathConntrackUDP: a UDP exchange behind rules that drop new
// connections to and from its port (established ones pass) runs on the
// fast path for three times conntrack's stream timeout (lowered to 10 s in
// the test's hosts), then survives an invalidation: the keeper renewed the
// entries the fast path kept from conntrack's sight, so the packets that
// take the slow path again still find them. FALCON_CT_SECONDS runs it that
// long with the kernel's own timeouts instead (300 for the evidence).
func TestFastPathConntrackUDP(t *testing.T) {
	needFastPath(t)
	if err := workload.CheckTools("nft"); err != nil {
		t.Skip(err)
	}
	d, lowered := 30*time.Second, os.Getenv("FALCON_CT_SECONDS") == ""
	if !lowered {
		d = ctSeconds(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	tb := ibed(t, "ctu", "calico", 1)
	const port = 7411
	for _, h := range tb.Hosts {
		if lowered {
			nsSh(t, h.Netns, "sysctl -qw net.netfilter.nf_conntrack_udp_timeout=5 net.netfilter.nf_conntrack_udp_timeout_stream=10")
		}
		// Conntrack tracks a namespace's packets only once a rule needs it:
		// from before the exchange starts, as on any host with such rules.
		nsSh(t, h.Netns, ctInvalidDrop)
	}
	warm(t, tb)
	as := fastAgents(ctx, t, tb, "fastpath")
	clients, servers := tb.Endpoints()
	dst := netip.MustParseAddr(servers[0].Addr)
	udpEcho(t, servers[0].Netns, dst, port)
	run, stop := context.WithCancel(ctx)
	defer stop()
	echoes := udpPinger(run, t, clients[0].Netns, netip.AddrPortFrom(dst, port), time.Millisecond)
	time.Sleep(3 * time.Second)
	if echoes.Load() == 0 {
		t.Fatal("no echo in 3 s before the rules")
	}
	for _, h := range tb.Hosts {
		nsSh(t, h.Netns, fmt.Sprintf("nft add rule inet fct fw udp dport %d ct state new counter drop; nft add rule inet fct fw udp sport %d ct state new counter drop", port, port))
	}
	var perSecond []int64
	for range int(d / time.Second) {
		n := echoes.Load()
		time.Sleep(time.Second)
		perSecond = append(perSecond, echoes.Load()-n)
	}
	hits := fastReportOf(t, as[1]).Counters["ingress_hit"]
	for _, h := range tb.Hosts {
		nsSh(t, h.Netns, "ip route add blackhole 198.51.100.0/24; ip route del blackhole 198.51.100.0/24")
	}
	n := echoes.Load()
	time.Sleep(2 * time.Second)
	after := echoes.Load() - n
	stop()
	newDrops := regexp.MustCompile(`ct state new counter packets (\d+) .*drop`)
	drops := dropped(t, tb.Hosts[0].Netns, newDrops) + dropped(t, tb.Hosts[1].Netns, newDrops)
	ct := fastReportOf(t, as[1]).Conntrack
	t.Logf("echoes per second %v; %d in the 2 s after the invalidation; %d fast-path hits at the receiver; %d dropped as new; receiver's conntrack %+v", perSecond, after, hits, drops, *ct)
	if drops != 0 || after == 0 {
		t.Errorf("after %v on the fast path and an invalidation: %d packets dropped as new connections, %d echoes", d, drops, after)
	}
	for s, e := range perSecond {
		if e == 0 {
			t.Errorf("second %d: no echo", s)
		}
	}
	if hits < 10000 || ct.Renewed == 0 {
		t.Errorf("the fast path did not carry the exchange (%d hits), or the keeper renewed nothing (%+v)", hits, *ct)
	}
}

// tcpCounts is what a namespace's TCP says of order and loss: segments
// queued out of order (receiver), reordering seen and segments resent
// (sender).
type tcpCounts struct{ OFOQueue, SACKReorder, TSReorder, Retrans int64 }

func tcpOrder(t *testing.T, ns string) tcpCounts {
	t.Helper()
	s, err := procfs.ReadSNMP(ns)
	if err != nil {
		t.Fatal(err)
	}
	x := s["TcpExt"]
	return tcpCounts{x["TCPOFOQueue"], x["TCPSACKReorder"], x["TCPTSReorder"], s["Tcp"]["RetransSegs"]}
}

func (c tcpCounts) minus(o tcpCounts) tcpCounts {
	return tcpCounts{c.OFOQueue - o.OFOQueue, c.SACKReorder - o.SACKReorder, c.TSReorder - o.TSReorder, c.Retrans - o.Retrans}
}
