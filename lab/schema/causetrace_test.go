package schema

import (
	"testing"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cause"
)

// A run's decisions by cause become one replayable trace.
func TestCauseTraces(t *testing.T) {
	w := cause.Window{Ms: 150, Delivered: 10}
	act := &FalconActivity{Causes: &CauseActivity{Params: cause.Params{Threshold: 85, Set: []int{0, 1}},
		Trace: []agent.CauseRecord{{Seq: 1, Window: w}, {Seq: 2, Window: w}}}}
	f := &File{Results: []Result{{Layout: "docker", Mode: "falcon:policy=paper", Workload: "udp-stress", Size: 16,
		Runs: []Run{{}, {Falcon: act}}}}}
	got := f.CauseTraces()
	tr, ok := got["docker-falcon_policy_paper-udp-stress-16-run2.json"]
	if len(got) != 1 || !ok || len(tr.Windows) != 2 || tr.Params.Threshold != 85 {
		t.Fatalf("traces: %+v", got)
	}
	if s := tr.Replay(0); len(s) != 2 {
		t.Errorf("replayed %d turns", len(s))
	}
}
