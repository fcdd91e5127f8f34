package datapath

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/steer"
)

func randomAddr(r *rand.Rand, v6 bool) netip.Addr {
	if v6 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		b[0] = 0xfd
		return netip.AddrFrom16(b)
	}
	var b [4]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return netip.AddrFrom4(b)
}

func randomConfig(r *rand.Rand) Config {
	cfg := DefaultConfig()
	cfg.Policy = PolicyPaper
	if r.IntN(4) == 0 {
		cfg.Policy = PolicyStatic
	}
	cfg.AlwaysOn = r.IntN(5) == 0
	n := 1 + r.IntN(16)
	switch r.IntN(10) {
	case 0:
		n = 1 + r.IntN(MaxCPUs)
	case 1:
		n = 1
	}
	ids := r.Perm(MaxCPUs)[:n]
	if r.IntN(3) == 0 { // small machines: low, dense ids
		ids = r.Perm(n + r.IntN(4))[:n]
	}
	cfg.CPUs = ids
	cfg.Threshold = r.IntN(101)
	cfg.PerPacket = r.IntN(2) == 0
	if r.IntN(2) == 0 {
		cfg.Fallback = FallbackLocal
	}
	cfg.StaleAfter = 0
	if r.IntN(2) == 0 {
		cfg.StaleAfter = 10 * time.Second
	}
	return cfg
}

// twinFlows is how many random flows TestTwinAgrees compares: 12 000, or
// FALCON_TWIN_FLOWS. The emulated kernel guest (scripts/kernels/guest.sh)
// checks that the old kernel's verifier and helpers run the program as the
// host's does, not the choice's logic, which the host's full count covers:
// under TCG each test run of the program is many times slower, and 12 000
// flows took 51 s. (The split's twin keeps its full count there: it is the
// one machine here whose kernel runs it.)
func twinFlows(t *testing.T) int {
	v := os.Getenv("FALCON_TWIN_FLOWS")
	if v == "" {
		return 12000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 500 {
		t.Fatalf("FALCON_TWIN_FLOWS=%q: want a count of at least 500 (each kind of choice needs 5 %% of them)", v)
	}
	return n
}

// TestTwinAgrees checks the BPF program and internal/steer make the same
// choice for random flows, CPU sets, loads, thresholds and staleness.
//
// guest: the steering program's choice, as the old kernel's verifier and helpers run it
func TestTwinAgrees(t *testing.T) {
	flows := twinFlows(t)
	h := newHarness(t, testConfig())
	r := rand.New(rand.NewPCG(5, 6))
	var cfg Config
	kinds := map[steer.Kind]int{}
	for i := 0; i < flows; i++ {
		if i%100 == 0 {
			cfg = randomConfig(r)
			if err := h.d.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
		}
		load := make([]uint32, MaxCPUs)
		for _, c := range cfg.CPUs {
			load[c] = uint32(r.IntN(101))
		}
		avg := uint32(r.IntN(cfg.Threshold + 15))
		stale := cfg.StaleAfter > 0 && r.IntN(5) == 0
		if stale {
			at := uint64(0) // never written
			if now := monotonicNs(t); r.IntN(2) == 0 && now > uint64(time.Minute) {
				at = now - uint64(time.Minute) // too old
			}
			if err := h.d.SetLoad(load, avg, at); err != nil {
				t.Fatal(err)
			}
		} else {
			h.setLoad(load, avg, true)
		}

		role := HookOnOverlay
		if r.IntN(2) == 0 {
			role = HookOnNIC
		}
		h.setSalt(role, r.IntN(1<<20))
		v6 := r.IntN(2) == 0
		f := flowSpec{proto: []uint8{protoTCP, protoUDP, protoTCP, protoUDP, 1, 132}[r.IntN(6)],
			src: randomAddr(r, v6), dst: randomAddr(r, v6), sport: uint16(r.Uint32()), dport: uint16(r.Uint32())}
		pkt := frame(f, pktOpts{payload: r.IntN(64), vlan: r.IntN(8) == 0})
		if role == HookOnNIC {
			outer6 := r.IntN(2) == 0
			port := DefaultVXLANPorts[r.IntN(2)]
			pkt = vxlanFrame(randomAddr(r, outer6), randomAddr(r, outer6), port, pkt, pktOpts{})
		}
		res := h.run(role, pkt)
		if res.dbg.Hit != 0 {
			continue // a repeated random flow within the gap: not a fresh choice
		}
		h.checkSteer(fmt.Sprintf("flow %d (%v, S=%v T=%d)", i, f, slices.Sorted(slices.Values(cfg.CPUs)), cfg.Threshold),
			res, role, f.hash(), load, avg, stale)
		kinds[steer.Kind(res.dbg.Kind)]++
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("decisions: %v", kinds)
	for _, k := range []steer.Kind{steer.First, steer.Second, steer.Fallback} {
		if kinds[k] < flows/20 {
			t.Errorf("only %d %v decisions: the random cases do not exercise it", kinds[k], k)
		}
	}
}
