package agent

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/internal/steer"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// TestMflowLayouts enables mode mflow (batches of 32, elephants from
// 20 Mbit/s, split CPUs 0 and 1) on the receiving host of each container
// layout and runs one iperf3 TCP flow at full rate (2-3 Gbit/s here, about
// 60 Mbit/s in a 6.1 guest under emulation) beside one paced at 2 Mbit/s. Then, as the kernel's own tracepoint (net:netif_receive_skb at
// the NIC, where the cpumap kthread hands over the skbs it built) sees it:
//   - the elephant's NIC stage ran on both split CPUs (each at least 5 %:
//     a CPU at the threshold is passed over), in runs of consecutive
//     sequence space whose mean length is the batch (within a factor of 4:
//     retransmissions, GRO's merges and passed-over CPUs blur it);
//   - the mouse was not split (the split program's state of the flow: no
//     packet in a micro-flow);
//   - the split program dropped nothing (where a cpumap queue was full,
//     it built the frame inline, as the kernel does without falcon);
//   - disable restores every value and leaves nothing behind.
//
// The out-of-order segments TCP repaired and the retransmissions are
// logged: that is the cost MFLOW trades, measured by the bench (mflow7).
//
// guest: mflow's micro-flows over the cpumap without GRO on 6.1
func TestMflowLayouts(t *testing.T) {
	needSplit(t)
	needTestbed(t)
	for _, layout := range []string{"docker", "flannel", "calico"} {
		t.Run(layout, func(t *testing.T) { mflowOn(t, layout) })
	}
}

const mflowBatch = 32

func mflowOn(t *testing.T, layout string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := ibed(t, "m"+layout[:3], layout, 1)
	h2 := tb.Hosts[1]
	nss := hostSide(h2)
	before := queueValues(t, nss)
	warm(t, tb)

	o := testOptions(t, h2.Netns)
	if err := ParseMode("mflow:split-cpus=0-1,elephant=20M", &o); err != nil {
		t.Fatal(err)
	}
	o.Batch, o.CPUs, o.Threshold = mflowBatch, []int{0, 1}, 100
	key, err := Key(o.Netns)
	if err != nil {
		t.Fatal(err)
	}
	_, stop := startAgent(ctx, t, o)
	objs := falconObjects(t, nss)

	const elephantPort, mousePort = 5311, 5312
	tr, err := stagetrace.Start(stagetrace.Options{Netns: nss, Proto: 6, PortMin: elephantPort, PortMax: mousePort})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	clients, servers := tb.Endpoints()
	snmp := func() map[string]map[string]int64 {
		s, err := procfs.ReadSNMP(servers[0].Netns)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s0 := snmp()
	results := elephantAndMouse(ctx, t, clients[0], servers[0], elephantPort, mousePort)
	recs, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	s1 := snmp()
	r := status(t, o)

	nicStage := h2.Netns + "/" + h2.NIC
	elephant, mouse := elephantMouseFlows(t, recs, nicStage, elephantPort, mousePort)
	er, mr := stagetrace.RunLengths(recs, elephant, nicStage), stagetrace.RunLengths(recs, mouse, nicStage)
	t.Logf("elephant %.0f Mbit/s, %d retransmits: NIC stage runs %v; mouse %.1f Mbit/s: %v",
		results[0].BitsPerSecond/1e6, results[0].Retransmits, er, results[1].BitsPerSecond/1e6, mr)
	t.Logf("receiver: TCPOFOQueue +%d, TCPOFOMerge +%d; micro-flows %+v",
		s1["TcpExt"]["TCPOFOQueue"]-s0["TcpExt"]["TCPOFOQueue"], s1["TcpExt"]["TCPOFOMerge"]-s0["TcpExt"]["TCPOFOMerge"], r.Split.Micro)

	checkMicroFlows(t, er, mr, filepath.Join(o.pinRoot(), key), elephant, mouse, r)

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	sameValues(t, "after disable", before, queueValues(t, nss))
	objs.gone(t)
	noFilters(t, nss)
	noTrace(t, tb, o)
	noPaths(t, filepath.Join(o.pinRoot(), key), filepath.Join(o.stateRoot(), key))
}

// elephantAndMouse runs two iperf3 flows from cli to srv at once: an
// elephant at full rate to elephantPort, a paced mouse to mousePort.
func elephantAndMouse(ctx context.Context, t *testing.T, cli, srv testbed.Endpoint, elephantPort, mousePort int) []workload.Iperf3Result {
	t.Helper()
	var wg sync.WaitGroup
	results := make([]workload.Iperf3Result, 2)
	errs := make([]error, 2)
	for i, port := range []int{elephantPort, mousePort} {
		srvr, err := workload.StartIperf3Server(ctx, srv.Netns, port, []int{1})
		if err != nil {
			t.Fatal(err)
		}
		defer srvr.Stop()
		rate, size := "", 0 // full rate, iperf3's 128 KiB writes
		if port == mousePort {
			// Small writes, paced: a mouse at every time scale. In
			// 128 KiB writes a 2 Mbit/s flow sends bursts that, under
			// emulation, last longer than a rate window at 100 Mbit/s,
			// and are elephants while they last (6.1 guest: 204-342 of
			// ~590 segments split).
			rate, size = "2M", 1400
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = workload.RunIperf3(ctx, workload.Iperf3Opts{Netns: cli.Netns, Addr: srv.Addr,
				Port: port, Duration: 3 * time.Second, CPUs: []int{0}, Bitrate: rate, Size: size})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return results
}

// elephantMouseFlows finds the two flows, by their ports, among what the
// tracer saw at the NIC's stage.
func elephantMouseFlows(t *testing.T, recs []stagetrace.Record, nicStage string, elephantPort, mousePort uint16) (elephant, mouse stagetrace.Flow) {
	t.Helper()
	elephant, _ = stagetrace.DataFlow(recs, nicStage, elephantPort)
	mouse, _ = stagetrace.DataFlow(recs, nicStage, mousePort)
	if !elephant.Src.IsValid() || !mouse.Src.IsValid() {
		t.Fatalf("the tracer saw no data flow to ports %d and %d at %s: %+v", elephantPort, mousePort, nicStage, recs)
	}
	return elephant, mouse
}

// checkMicroFlows: the elephant's NIC stage ran on both split CPUs in runs
// of about the batch, the mouse was never split, status shows the
// micro-flows, and no split CPU dropped a frame.
func checkMicroFlows(t *testing.T, er, mr map[int]stagetrace.Runs, pin string, elephant, mouse stagetrace.Flow, r *Report) {
	t.Helper()
	all := stagetrace.AllRuns(er)
	for _, cpu := range []int{0, 1} {
		// Not an even share: a CPU at the threshold (100 %: the sender's,
		// at times) is passed over for the next micro-flow (seen: 16 %).
		if share := float64(er[cpu].DataSegs) / float64(all.DataSegs); share < 0.05 {
			t.Errorf("the elephant's NIC stage: CPU %d built %.0f %% of its segments, want a share of both split CPUs", cpu, 100*share)
		}
		// Runs no shorter than a batch (a quarter, for GRO's merges and
		// the tracer's view): not sprayed packet by packet. Longer ones
		// are consecutive micro-flows on one CPU while the other is
		// passed over (seen: 140 segments on average on CPU 1).
		if m := er[cpu].MeanLen(); m < mflowBatch/4 {
			t.Errorf("the elephant's NIC stage on CPU %d: runs of %.1f segments on average, want at least about the batch, %d", cpu, m, mflowBatch)
		}
	}
	// A new micro-flow every batch of the elephant's packets.
	if r.Split != nil && r.Split.Micro != nil && r.Split.Micro.Started > 0 {
		mi := r.Split.Micro
		if per := float64(mi.SplitPackets) / float64(mi.Started); per < mflowBatch/2 || per > mflowBatch*2 {
			t.Errorf("micro-flows of %.1f packets on average (%d packets, %d started), want the batch, %d", per, mi.SplitPackets, mi.Started, mflowBatch)
		}
	}
	// The mouse moves whole, under the guard, between the split CPUs and
	// the interrupt CPU (a CPU at 100 %, often in a 6.1 guest under
	// emulation: runs of 10-40 segments there), so its runs do not tell;
	// the split program's own state of the flow does. A paced mouse that
	// catches up after its sender stalled (a loaded host, an emulated
	// guest) runs at the elephant rate while it does, and is one
	// meanwhile, in order under the guard (6.1 under TCG: 25 of 607): at
	// a tenth of the elephant rate, that can be but a small share.
	for _, f := range []struct {
		name  string
		flow  stagetrace.Flow
		split bool
	}{{"elephant", elephant, true}, {"mouse", mouse, false}} {
		m, ok, err := datapath.ReadMicroFlow(pin, steer.FlowHash(f.flow.Proto, f.flow.Src, f.flow.Dst, f.flow.Sport, f.flow.Dport))
		if err != nil || !ok {
			t.Fatalf("%s: the split program's state: %+v, %v, %v", f.name, m, ok, err)
		}
		t.Logf("%s: %+v", f.name, m)
		if segs := uint64(stagetrace.AllRuns(mr).DataSegs); f.split && m.Split == 0 || !f.split && m.Split*10 > segs {
			t.Errorf("the %s sent %d packets in micro-flows (the mouse %d in all)", f.name, m.Split, segs)
		}
	}
	if m := stagetrace.AllRuns(mr); m.DataSegs < 100 {
		t.Errorf("the mouse's NIC stage: %v, want its segments", m)
	}
	if r.Split == nil || r.Split.Micro == nil || r.Split.Micro.Started == 0 || r.Split.Micro.SplitPackets == 0 {
		t.Errorf("status shows no micro-flows: %+v", r.Split)
	}
	// Where a queue was full, a micro-flow's frame is built inline, as
	// without falcon: nothing is lost that vanilla would deliver.
	for cpu, s := range r.Split.PerCPU {
		t.Logf("split CPU %d: %+v", cpu, s)
		if s.QueueFull+s.EnqueueDrops+s.BuildDrops != 0 {
			t.Errorf("split CPU %d dropped: %+v", cpu, s)
		}
	}
}
