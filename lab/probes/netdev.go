package probes

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/netns"
)

// devCounters are the receive counters of one /proc/net/dev line.
type devCounters struct{ RxPackets, RxDropped uint64 }

// parseNetDev parses /proc/net/dev: two header lines, then
// "name: rx_bytes rx_packets rx_errs rx_drop … tx_bytes …".
func parseNetDev(b []byte) (map[string]devCounters, error) {
	out := map[string]devCounters{}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "Receive") {
		return nil, fmt.Errorf("/proc/net/dev: unexpected header %q", lines[0])
	}
	for _, l := range lines[2:] {
		name, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("/proc/net/dev: short line %q", l)
		}
		var v [4]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/net/dev: %q: %v", l, err)
			}
			v[i] = n
		}
		out[strings.TrimSpace(name)] = devCounters{RxPackets: v[1], RxDropped: v[3]}
	}
	return out, nil
}

func readNetDev(ns string) (map[string]devCounters, error) {
	b, err := netns.ReadProcNet(ns, "dev")
	if err != nil {
		return nil, err
	}
	return parseNetDev(b)
}
