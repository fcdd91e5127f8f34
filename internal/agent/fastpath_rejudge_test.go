package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/seqcheck"
)

// laterRules are rules whose verdict can change within a flow, added while
// a flow is cached: the fast path must turn itself off. max bounds what the
// slow path delivers in a 2 s window after, where the rule limits (0: no
// bound), scaled to the window's measured length.
var laterRules = []struct {
	name, rule string
	max        uint64
}{
	{"limit-rate", "nft add rule inet fpr fw udp dport %d limit rate over 100/second drop", 2*100 + 5 + 50},
	{"limit-name", "nft add limit inet fpr lim '{ rate over 100/second; }'; nft add rule inet fpr fw udp dport %d limit name lim drop", 2*100 + 5 + 50},
	{"meta-length", "nft add rule inet fpr fw udp dport %d meta length gt 1000 drop", 0},
}

// laterSettle: from the fast path off to the window's start.
const laterSettle = 300 * time.Millisecond

// TestFastPathRulesLater: a rule that decides per packet, added to the
// receiving host's forward chain while a UDP flow at about 20 000
// datagrams/s is cached, turns the fast path off within the bound
// (500 ms from the command; measured values are logged), status says why,
// the slow path then applies the rule; with the rule gone the fast path
// comes back.
func TestFastPathRulesLater(t *testing.T) {
	needFastPath(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tb := ibed(t, "rl", "calico", 1)
	warm(t, tb)
	as := fastAgents(ctx, t, tb, "fastpath")
	rx := tb.Hosts[1].Netns
	clients, servers := tb.Endpoints()
	dst := netip.MustParseAddr(servers[0].Addr)
	for i, r := range laterRules {
		t.Run(r.name, func(t *testing.T) {
			port := uint16(7421 + i)
			cnt := countUDP(t, servers[0].Netns, dst, port)
			sendCtx, stop := context.WithCancel(ctx)
			defer stop()
			go seqcheck.Send(sendCtx, seqcheck.SendOptions{Netns: clients[0].Netns, Dst: dst, Port: port, Flows: 1,
				PktsPerFlow: 1 << 28, Size: 64, CPU: 0, Pause: 500 * time.Microsecond, PauseEvery: 10})
			hits := func() uint64 { return fastReportOf(t, as[1]).Counters["ingress_hit"] }
			time.Sleep(time.Second)
			if h := hits(); h == 0 {
				t.Fatal("the flow is not on the fast path before the rule")
			}
			nsSh(t, rx, "nft add table inet fpr; nft add chain inet fpr fw '{ type filter hook forward priority 0; }'")
			start := time.Now()
			nsSh(t, rx, fmt.Sprintf(r.rule, port))
			off := waitFor(t, 2*time.Second, func() bool { return fastReportOf(t, as[1]).Off != "" })
			// What arrived before the fast path went off (up to 500 ms of
			// the flow) may still sit in the socket's 4 MiB buffer: the
			// window starts once the reader has had time to drain it.
			time.Sleep(laterSettle)
			h0, n0, t0 := hits(), cnt.n.Load(), time.Now()
			time.Sleep(2 * time.Second)
			h1, n1, window := hits(), cnt.n.Load(), time.Since(t0)
			allowed := r.max * uint64(window.Milliseconds()) / 2000
			t.Logf("%s: off %v after the command (%q); then %d fast hits and %d delivered in %v", r.name, off.Sub(start), fastReportOf(t, as[1]).Off, h1-h0, n1-n0, window)
			if off.Sub(start) > 500*time.Millisecond {
				t.Errorf("the fast path turned off %v after the rule, want within 500 ms", off.Sub(start))
			}
			if h1 != h0 || r.max > 0 && n1-n0 > allowed {
				t.Errorf("with the rule: %d fast hits, %d delivered in %v (the rule allows %d)", h1-h0, n1-n0, window, allowed)
			}
			nsSh(t, rx, "nft delete table inet fpr")
			waitFor(t, 2*time.Second, func() bool { return fastReportOf(t, as[1]).Off == "" })
			waitFor(t, 2*time.Second, func() bool { return hits() > h1 })
		})
	}
}

// waitFor polls cond every 5 ms until it holds, and returns when; it fails
// the test after d.
func waitFor(t *testing.T, d time.Duration, cond func() bool) time.Time {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return time.Now()
		}
	}
	t.Fatalf("not within %v", d)
	return time.Time{}
}

// TestFastPathTCPolicy: policy outside netfilter is honoured. A TBF qdisc
// added to the receiving container's host-side veth leaves that container
// to the slow path (status names it) and the flow is shaped as without
// falcon; another's tc filter on the NIC, or an IPsec policy, turns the
// fast path off (status says why); each removed, the fast path returns.
func TestFastPathTCPolicy(t *testing.T) {
	needFastPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tb := ibed(t, "tp", "calico", 1)
	warm(t, tb)
	as := fastAgents(ctx, t, tb, "fastpath")
	h := tb.Hosts[1]
	clients, servers := tb.Endpoints()
	dst := netip.MustParseAddr(servers[0].Addr)
	report := func() *FastReport { return fastReportOf(t, as[1]) }
	hits := func() uint64 { return report().Counters["ingress_hit"] }
	// flow starts a flow on port and waits for it to take the fast path. A
	// new one after each step: one whose slow packets were dropped (by the
	// TBF) stays slow until its slow path has been quiet for a second.
	flow := func(port uint16) *udpCounter {
		t.Helper()
		cnt := countUDP(t, servers[0].Netns, dst, port)
		go seqcheck.Send(ctx, seqcheck.SendOptions{Netns: clients[0].Netns, Dst: dst, Port: port, Flows: 1,
			PktsPerFlow: 1 << 28, Size: 64, CPU: 0, Pause: 500 * time.Microsecond, PauseEvery: 10})
		h0 := hits()
		waitFor(t, 3*time.Second, func() bool { return hits() > h0+100 })
		return cnt
	}
	steps := []struct{ name, add, del string }{
		{"tbf on the host veth", "tc qdisc add dev " + h.Containers[0].HostVeth + " root tbf rate 1mbit burst 10k latency 50ms",
			"tc qdisc del dev " + h.Containers[0].HostVeth + " root"},
		{"u32 filter on the NIC", "tc qdisc add dev " + h.NIC + " ingress; tc filter add dev " + h.NIC + " parent ffff: prio 7 u32 match u32 0 0 flowid 1:1",
			"tc qdisc del dev " + h.NIC + " ingress"},
		{"IPsec policy", "ip xfrm policy add dir out src 192.0.2.0/24 dst 198.51.100.0/24", "ip xfrm policy flush"},
	}
	for i, s := range steps {
		cnt := flow(uint16(7431 + i))
		start := time.Now()
		nsSh(t, h.Netns, s.add)
		waitFor(t, 2*time.Second, func() bool { r := report(); return r.Off != "" || len(r.Unreachable) > 0 })
		took := time.Since(start)
		time.Sleep(300 * time.Millisecond)
		h0, n0 := hits(), cnt.n.Load()
		time.Sleep(time.Second)
		r := report()
		t.Logf("%s: slow within %v (off %q, not fast-pathed %q); then %d fast hits, %d delivered in 1 s", s.name, took, r.Off, r.Unreachable, r.Counters["ingress_hit"]-h0, cnt.n.Load()-n0)
		if r.Counters["ingress_hit"] != h0 {
			t.Errorf("%s: %d packets still took the fast path", s.name, r.Counters["ingress_hit"]-h0)
		}
		nsSh(t, h.Netns, s.del)
		waitFor(t, 2*time.Second, func() bool { r := report(); return r.Off == "" && len(r.Unreachable) == 0 })
	}
	flow(7441)
}
