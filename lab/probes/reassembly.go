package probes

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/testbed"
)

// ReassemblyPoll is how often a run waiting for fragment reassembly to
// empty looks again.
const ReassemblyPoll = 100 * time.Millisecond

// AwaitReassembly waits until no namespace of the testbed holds fragments
// of an unfinished datagram, and says how long that took. A run that lost
// fragments (a saturated CPU drops some of a datagram's) leaves the rest
// in reassembly until ipfrag_time expires them, 30 s by default: longer
// than the gap between runs. The memory they hold counts against
// ipfrag_high_thresh, above which every new fragment is dropped, so the
// next run would start where this one collapsed and measure that.
func AwaitReassembly(ctx context.Context, tb *testbed.Testbed) (time.Duration, error) {
	nss := testbedNamespaces(tb)
	start := time.Now()
	var limit time.Duration
	for {
		held := map[string]int64{}
		for _, ns := range nss {
			n, err := procfs.ReadFragMemory(ns)
			if err != nil {
				return 0, err
			}
			if n > 0 {
				held[ns] = n
			}
		}
		if len(held) == 0 {
			return time.Since(start), nil
		}
		if limit == 0 {
			// Nothing sends between runs, so everything held then is gone
			// once the longest expiry has passed.
			exp, err := fragExpiry(nss)
			if err != nil {
				return 0, err
			}
			limit = exp + time.Second
		}
		if time.Since(start) > limit {
			var what []string
			for ns, n := range held {
				what = append(what, fmt.Sprintf("%s holds %d bytes", netns.Label(ns), n))
			}
			return 0, fmt.Errorf("IP fragment reassembly still not empty %s after the last run, longer than it keeps fragments (%s): "+
				"something else sends fragments into the testbed", limit.Round(time.Second), strings.Join(what, ", "))
		}
		if err := Wait(ctx, ReassemblyPoll); err != nil {
			return 0, err
		}
	}
}

// testbedNamespaces are the namespaces where a testbed's packets are
// reassembled: hosts (the underlay's UDP), sandboxes and containers.
func testbedNamespaces(tb *testbed.Testbed) []string {
	var nss []string
	for _, h := range tb.Hosts {
		if !slices.Contains(nss, h.Netns) {
			nss = append(nss, h.Netns)
		}
		if h.Sandbox != "" {
			if !slices.Contains(nss, h.Sandbox) {
				nss = append(nss, h.Sandbox)
			}
		}
		for _, c := range h.Containers {
			if !slices.Contains(nss, c.Netns) {
				nss = append(nss, c.Netns)
			}
		}
	}
	return nss
}

// fragExpiry is the longest time any of the namespaces keeps an
// incomplete datagram (net.ipv4.ipfrag_time, net.ipv6.ip6frag_time: each
// namespace has its own).
func fragExpiry(nss []string) (time.Duration, error) {
	var longest int
	for _, ns := range nss {
		err := netns.Do(ns, func() error {
			for _, f := range []string{"/proc/sys/net/ipv4/ipfrag_time", "/proc/sys/net/ipv6/ip6frag_time"} {
				b, err := os.ReadFile(f)
				if os.IsNotExist(err) {
					continue // IPv6 disabled
				}
				if err != nil {
					return err
				}
				s, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				longest = max(longest, s)
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("fragment expiry in netns %s: %w", netns.Label(ns), err)
		}
	}
	return time.Duration(longest) * time.Second, nil
}
