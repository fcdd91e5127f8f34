package probes

import (
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
)

func TestBPFCostsOverWindow(t *testing.T) {
	before := map[string]datapath.ProgStats{"falcon_steer": {RunCount: 100, RunTime: 10 * time.Microsecond}}
	after := map[string]datapath.ProgStats{
		"falcon_steer": {RunCount: 1100, RunTime: 260 * time.Microsecond},
		"falcon_split": {RunCount: 50, RunTime: 10 * time.Microsecond}, // attached during the window
	}
	got := bpfCosts(before, after)
	if c := got["falcon_steer"]; c.Runs != 1000 || c.TimeNs != 250000 || c.NsPerRun != 250 {
		t.Errorf("falcon_steer = %+v, want 1000 runs, 250000 ns, 250 ns/run", c)
	}
	if c := got["falcon_split"]; c.Runs != 50 || c.NsPerRun != 200 {
		t.Errorf("falcon_split = %+v", c)
	}
	if bpfCosts(nil, nil) != nil {
		t.Error("no statistics should record nothing")
	}

	r := schema.Result{Layout: "docker", Mode: "falcon", Workload: "udp-stress", Size: 16, Flows: 1,
		Runs: []schema.Run{{PPS: 1, WindowS: 1, BPF: got}}}
	r.Summarize()
	var b strings.Builder
	if err := render.WriteTable(&b, &schema.File{Results: []schema.Result{r}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| falcon_steer | 250") || !strings.Contains(b.String(), "| falcon_split | 200") {
		t.Errorf("cost table lacks the programs:\n%s", b.String())
	}
}
