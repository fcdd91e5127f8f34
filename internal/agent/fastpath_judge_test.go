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
// slow path delivers in the 2 s after, where the rule limits (0: no bound).
var laterRules = []struct {
	name, rule string
	max        uint64
}{
	{"limit-rate", "nft add rule inet fpr fw udp dport %d limit rate over 100/second drop", 2*100 + 5 + 50},
	{"limit-name", "nft add limit inet fpr lim '{ rate over 100/second; }'; nft add rule inet fpr fw udp dport %d limit name lim drop", 2*100 + 5 + 50},
	{"meta-length", "nft add rule inet fpr fw udp dport %d meta length gt 1000 drop", 0},
}

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
			h0, n0 := hits(), cnt.n.Load()
			time.Sleep(2 * time.Second)
			h1, n1 := hits(), cnt.n.Load()
			t.Logf("%s: off %v after the command (%q); then %d fast hits and %d delivered in 2 s", r.name, off.Sub(start), fastReportOf(t, as[1]).Off, h1-h0, n1-n0)
			if off.Sub(start) > 500*time.Millisecond {
				t.Errorf("the fast path turned off %v after the rule, want within 500 ms", off.Sub(start))
			}
			if h1 != h0 || r.max > 0 && n1-n0 > r.max {
				t.Errorf("with the rule: %d fast hits, %d delivered (the rule allows %d)", h1-h0, n1-n0, r.max)
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
