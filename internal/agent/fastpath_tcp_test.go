package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

// TestFastPathTCPAggregatesIntact: a TCP stream of large writes reaches
// the receiving host as tunnel aggregates (one GSO packet through the
// testbed's veth wire, or a GRO aggregate); the fast path decapsulates
// them in tc and delivers them whole, and the socket gets the stream byte
// for byte. The caches are invalidated twice a second meanwhile, so the
// flow keeps leaving the fast path and coming back under the guard. A
// container where something may rewrite a destination before routing gets
// them by the slow path, whole stream all the same.
func TestFastPathTCPAggregatesIntact(t *testing.T) {
	needFastPath(t)
	// The testbed's containers forward, as every container does where the
	// host forwards (a namespace starts with the host's settings): they
	// take aggregates to their own address whole, unless something there
	// may rewrite the destination before routing. One that forwards
	// nowhere takes any.
	for i, c := range []struct {
		layout, name, setup string
		slow                bool
	}{
		{"docker", "docker", "", false},
		{"calico", "calico", "", false},
		{"docker", "docker-forwarding-nowhere", "sysctl -qw net.ipv4.ip_forward=0", false},
		{"docker", "docker-nat", "nft add table ip t; nft add chain ip t pre '{ type nat hook prerouting priority -100; }'", true},
	} {
		name := c.name
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			tb := ibed(t, fmt.Sprintf("agg%d", i), c.layout, 1)
			warm(t, tb)
			clients, servers := tb.Endpoints()
			if c.setup != "" {
				nsSh(t, servers[0].Netns, c.setup)
			}
			as := fastAgents(ctx, t, tb, "fastpath")
			dst := netip.AddrPortFrom(netip.MustParseAddr(servers[0].Addr), 7412)
			got := tcpSink(t, servers[0].Netns, dst)
			before := fastReportOf(t, as[1]).Counters["ingress_hit"]
			churn, stopChurn := context.WithCancel(ctx)
			done := invalidateEach(churn, tb, 500*time.Millisecond)
			const total = 768 << 20
			sum := tcpSend(t, clients[0].Netns, dst, total)
			stopChurn()
			churns := <-done
			var r sinkResult
			select {
			case r = <-got:
			case <-ctx.Done():
				t.Fatal("the receiver did not see the stream end")
			}
			rep := fastReportOf(t, as[1])
			hits := rep.Counters["ingress_hit"] - before
			if c.slow == (len(rep.SlowAggregates) == 0) {
				t.Errorf("status names %q as taking TCP aggregates by the slow path", rep.SlowAggregates)
			}
			t.Logf("%s: %d MiB, %d fast packets into the receiving container (%.0f KiB each on average), %d invalidation rounds",
				name, r.n>>20, hits, float64(total)/float64(max(hits, 1))/1024, churns)
			if r.err != nil || r.n != total || r.sum != sum {
				t.Fatalf("received %d of %d bytes (err %v), digest equal: %v", r.n, total, r.err, r.sum == sum)
			}
			// With the aggregates slow the fast packets are the stream's
			// lone segments: 13 to 37 measured.
			// With them fast, how much of the stream goes fast depends on
			// how long each invalidation keeps the flow slow: 59, 104 and
			// 132 KiB of the stream per fast packet measured (aggregates
			// up to 64 KiB, the rest slow). An eighth of the stream in
			// 64 KiB aggregates separates the two.
			some := uint64(total / (64 << 10) / 8)
			switch {
			case !c.slow && hits < some:
				t.Errorf("only %d fast packets for %d MiB: the aggregates did not take the fast path", hits, total>>20)
			case c.slow && hits >= some:
				t.Errorf("%d fast packets for %d MiB into a container that may forward them: aggregates took the fast path", hits, total>>20)
			}
		})
	}
}

type sinkResult struct {
	n   int64
	sum [sha256.Size]byte
	err error
}

// tcpSink accepts one connection on addr in ns and reports what it read.
func tcpSink(t *testing.T, ns string, addr netip.AddrPort) <-chan sinkResult {
	t.Helper()
	var l net.Listener
	err := netns.Do(ns, func() error {
		var err error
		l, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	out := make(chan sinkResult, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			out <- sinkResult{err: err}
			return
		}
		defer c.Close()
		h := sha256.New()
		n, err := io.Copy(h, c)
		r := sinkResult{n: n, err: err}
		copy(r.sum[:], h.Sum(nil))
		out <- r
	}()
	return out
}

// tcpSend writes n pseudo-random bytes to dst from ns in writes of 1 MiB
// (the stack sends them as GSO packets) and returns their digest.
func tcpSend(t *testing.T, ns string, dst netip.AddrPort, n int) [sha256.Size]byte {
	t.Helper()
	var c net.Conn
	err := netns.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", dst.String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := rand.NewChaCha8([32]byte{'f', 'a', 'l', 'c', 'o', 'n'})
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for sent := 0; sent < n; sent += len(buf) {
		src.Read(buf)
		h.Write(buf)
		if _, err := c.Write(buf); err != nil {
			t.Fatalf("after %d bytes: %v", sent, err)
		}
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
