package stagetrace

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/falconnet/falcon/internal/netns"
)

// pinAndSteer makes the stage CPUs predictable: the sender runs on CPU 0,
// so the NIC stage (veth NAPI) and the VXLAN stage (gro_cells) run there,
// and RPS on c1's eth0 sends the container stage to CPU 1.
func pinAndSteer(t *testing.T, o *overlay) int {
	t.Helper()
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	err := netns.WithSysfs(o.c1, func(root string) error {
		return os.WriteFile(filepath.Join(root, "class/net/eth0/queues/rx-0/rps_cpus"), []byte("2"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// The tracer reports the CPU that runs each stage: moving one stage with
// RPS moves its counts, and only its counts.
func TestStageCPUsFollowRPS(t *testing.T) {
	o := newOverlay(t, true)
	cpu := pinAndSteer(t, o)
	tr, err := Start(traceOptions(o))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	sent := sendTraffic(t, o, cpu)
	recs, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stages := StagesByFlow(recs)
	for f := range sent.udp {
		nic, vx, ct := stages[f][o.h2+"/nic0"], stages[f][o.h2+"/"+sent.flows[f]], stages[f][o.c1+"/eth0"]
		// The NIC stage runs wherever veth's NAPI instance is polling:
		// the sender's CPU as a rule, but a poll already under way on the
		// other CPU keeps it there (as a real NIC's stage follows its
		// interrupt). What is certain: the VXLAN stage, with no RPS, runs
		// inline with it, packet for packet on the same CPUs...
		if len(nic) == 0 || FormatCPUs(nic) != FormatCPUs(vx) {
			t.Errorf("%s: VXLAN stage %s, want the NIC stage's CPUs %s", f, FormatCPUs(vx), FormatCPUs(nic))
		}
		// ...and the stage RPS moved runs on the CPU RPS names, only there.
		if len(ct) != 1 || ct[1] == 0 {
			t.Errorf("%s at %s/eth0: %s, want all on cpu1", f, o.c1, FormatCPUs(ct))
		}
	}
}

// Which of the skb tracepoints fire, where and on which CPU, for packets
// through the overlay: logged for the record (go test -v -run
// TestTracepoints), asserted for net:netif_receive_skb, the one the
// tracer uses by default.
func TestTracepoints(t *testing.T) {
	t.Run("gro", func(t *testing.T) { testTracepoints(t, newOverlay(t, true)) })
	t.Run("backlog", func(t *testing.T) { testTracepoints(t, newOverlay(t, false)) })
}

func testTracepoints(t *testing.T, o *overlay) {
	cpu := pinAndSteer(t, o)
	tracers := map[string]*Tracer{}
	for _, tp := range Tracepoints {
		opts := traceOptions(o)
		opts.Tracepoint = tp
		tr, err := Start(opts)
		if err != nil {
			t.Fatalf("%s: %v", tp, err)
		}
		defer tr.Close()
		tracers[tp] = tr
	}
	sent := sendTraffic(t, o, cpu)

	for _, tp := range Tracepoints {
		recs, err := tracers[tp].Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		type agg struct {
			flows         int
			pkts, skbs    map[int]uint64
			udpPkts, want uint64
		}
		by := map[string]*agg{}
		for _, r := range recs {
			if _, ok := sent.flows[r.Flow]; !ok {
				continue
			}
			a := by[r.Stage()]
			if a == nil {
				a = &agg{pkts: map[int]uint64{}, skbs: map[int]uint64{}}
				by[r.Stage()] = a
			}
			a.flows++
			for c, n := range r.PerCPU {
				a.pkts[c] += n
				a.skbs[c] += r.SkbsPerCPU[c]
			}
		}
		stages := []string{o.h2 + "/nic0", o.h2 + "/vxlan0", o.h2 + "/vxlan6", o.c1 + "/eth0"}
		for _, st := range stages {
			a := by[st]
			if a == nil {
				t.Logf("%-28s %-16s nothing", tp, st[len(o.h1)-2:])
				continue
			}
			t.Logf("%-28s %-16s flows %2d/%d packets %s skbs %s", tp, st[len(o.h1)-2:],
				a.flows, len(sent.flows), FormatCPUs(a.pkts), FormatCPUs(a.skbs))
		}
		if tp != "netif_receive_skb" {
			continue
		}
		stg := StagesByFlow(recs)
		for f, vx := range sent.flows {
			for _, st := range []string{o.h2 + "/nic0", o.h2 + "/" + vx, o.c1 + "/eth0"} {
				if Total(stg[f][st]) == 0 {
					t.Errorf("netif_receive_skb missed %s at %s", f, st)
				}
			}
		}
	}
}
