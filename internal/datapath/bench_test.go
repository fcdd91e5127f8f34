package datapath

import (
	"testing"
	"time"
)

// TestProgramCost reports the program's warm cost per packet from
// BPF_PROG_TEST_RUN repeats (logged, not judged: machines differ).
func TestProgramCost(t *testing.T) {
	for _, perPacket := range []bool{false, true} {
		cfg := testConfig()
		cfg.PerPacket = perPacket
		h := newHarnessDebug(t, cfg, false)
		h.setLoad(nil, 0, true)
		for _, c := range []struct {
			name string
			role HookRole
			pkt  []byte
		}{
			{"overlay tcp4", HookOnOverlay, frame(tcp4, pktOpts{payload: 1000})},
			{"nic tcp4 in v4", HookOnNIC, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{payload: 1000}), pktOpts{})},
			{"nic not vxlan", HookOnNIC, frame(udp4, pktOpts{payload: 1000})},
		} {
			_, per, err := h.progs[c.role].Benchmark(c.pkt, 200000, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("per-packet=%v %s: %v per run", perPacket, c.name, per.Round(time.Nanosecond))
		}
	}
}
