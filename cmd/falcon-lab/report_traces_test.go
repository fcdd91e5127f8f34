package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/falconnet/falcon/internal/cause"
	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/schema"
)

// report --traces writes each run's decisions by cause as a replayable trace.
func TestReportTraces(t *testing.T) {
	var out bytes.Buffer
	reportOut = &out
	t.Cleanup(func() { reportOut = os.Stdout })
	dir := t.TempDir()
	name := filepath.Join(dir, "results.json")
	act := &schema.FalconActivity{Causes: &schema.CauseActivity{Params: schema.CauseParams{Threshold: 85, Set: []int{0, 1}},
		Trace: []schema.CauseRecord{{Seq: 1, Window: schema.CauseWindow{Ms: 150}}}}}
	f := &schema.File{Results: []schema.Result{{Layout: "docker", Mode: "falcon", Workload: "udp-stress", Size: 16, Runs: []schema.Run{{PPS: 1, Falcon: act}}}}}
	if err := schema.WriteFile(name, f); err != nil {
		t.Fatal(err)
	}
	traces := filepath.Join(dir, "traces")
	if err := runReport([]string{"--traces", traces, name}); err != nil {
		t.Fatal(err)
	}
	tr, err := cause.ReadTrace(filepath.Join(traces, "docker-falcon-udp-stress-16-run1.json"))
	if err != nil || len(tr.Windows) != 1 || tr.Params.Threshold != 85 {
		t.Errorf("trace: %+v, %v", tr, err)
	}
	if code := cli.ExitCode(runReport([]string{"--traces", traces, name, name})); code != 2 {
		t.Errorf("--traces with two files: exit %d, want 2", code)
	}
}
