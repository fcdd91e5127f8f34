package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Softnet is one line of /proc/net/softnet_stat: the backlog counters of
// one CPU.
type Softnet struct {
	CPU         int
	Processed   uint64 // packets taken off the backlog / NAPI
	Dropped     uint64 // backlog full (netdev_max_backlog)
	TimeSqueeze uint64 // net_rx_action ran out of budget or time
	ReceivedRPS uint64 // RPS/RFS IPIs that woke this CPU
	FlowLimit   uint64
	BacklogLen  uint64 // queue length at read time, not a counter
}

// ParseSoftnet parses /proc/net/softnet_stat, whose columns are hex.
// Kernels since 5.10 print the CPU number in column 13; older ones print one
// line per online CPU without it, and then the line number is used, which
// is only right when no CPU is offline.
func ParseSoftnet(b []byte) ([]Softnet, error) {
	var out []Softnet
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 0; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("/proc/net/softnet_stat line %d: %d columns, want at least 3", line+1, len(f))
		}
		var v [13]uint64
		for i := 0; i < len(f) && i < len(v); i++ {
			n, err := strconv.ParseUint(f[i], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/net/softnet_stat line %d column %d: %w", line+1, i+1, err)
			}
			v[i] = n
		}
		s := Softnet{CPU: line, Processed: v[0], Dropped: v[1], TimeSqueeze: v[2],
			ReceivedRPS: v[9], FlowLimit: v[10], BacklogLen: v[11]}
		if len(f) >= 13 {
			s.CPU = int(v[12])
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/proc/net/softnet_stat: %w", err)
	}
	return out, nil
}

// ReadSoftnet reads /proc/net/softnet_stat.
func ReadSoftnet() ([]Softnet, error) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return nil, err
	}
	return ParseSoftnet(b)
}
