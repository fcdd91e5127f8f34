package bench

import (
	"encoding/json"
	"testing"

	"github.com/falconnet/falcon/lab/measure"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/xdpsend"
)

// TestBenchKernelSender: the kernel sender drives udp-stress (3 flows into
// one server) and multi-flow (a flow to each of 2 containers) on the docker
// overlay, vanilla and falcon: the receivers get datagrams, the window
// counts what was sent, and what the sender reports is recorded per run.
func TestBenchKernelSender(t *testing.T) {
	online, name := integration(t, "k")
	needKernelSender(t)
	f := benchRun(t, online, name, "--layouts", "docker", "--modes", "vanilla,falcon", "--sender", "kernel",
		"--workloads", "udp-stress:64,multi-flow:64", "--flows", "2", "--containers", "2", "--runs", "1", "--duration", "1s")
	if len(f.Results) != 4 || f.Config.Sender != schema.SenderKernel {
		t.Fatalf("%d results, sender %q", len(f.Results), f.Config.Sender)
	}
	eachRun(t, f, func(what string, r schema.Result, run schema.Run) {
		sent := run.Counters["tx.kernel.frames"]
		var k measure.KernelSent
		if len(run.Tool) != 1 || json.Unmarshal(run.Tool[0], &k) != nil {
			t.Errorf("%s: tool results %s", what, run.Tool)
			return
		}
		wantFlows := 3
		if r.Workload == "multi-flow" {
			wantFlows = 2
		}
		t.Logf("%s: %.0f pps, sent %d in the window (%d in all, %d flows of %d B frames), loss %.1f %%",
			what, run.PPS, sent, k.Frames, k.Flows, k.FrameBytes, run.LossPct)
		if run.PPS <= 0 || sent <= 0 || uint64(sent) > k.Frames || k.Flows != wantFlows || !k.Encapsulated ||
			float64(run.Counters["rx.Udp.InDatagrams"]) > float64(sent)*1.01 {
			t.Errorf("%s: pps %v, window sent %d of %d, received %d, %+v", what, run.PPS, sent, k.Frames,
				run.Counters["rx.Udp.InDatagrams"], k)
		}
		// One line per destination: the sender's flows to one server share it.
		if want := map[string]int{"udp-stress": 1, "multi-flow": 2}[r.Workload]; len(r.Endpoints) != want {
			t.Errorf("%s: endpoints %q", what, r.Endpoints)
		}
	})
}

// needKernelSender skips where this kernel refuses XDP's live frames
// (xdpsend.LiveFrames says why): sandbox builds may.
func needKernelSender(t *testing.T) {
	t.Helper()
	if err := xdpsend.LiveFrames(); err != nil {
		t.Skip(err)
	}
}
