package bench

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
)

func TestRecordedFileShape(t *testing.T) {
	f, err := schema.ReadFile("../render/testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine.Cores < 1 || f.Machine.Kernel == "" || f.Config.Runs != 2 || len(f.Results) != 6 {
		t.Fatalf("unexpected recorded file: machine %+v, %d results", f.Machine, len(f.Results))
	}
	for _, r := range f.Results {
		if len(r.Runs) != 2 || r.Summary["pps"].N != 2 || r.Summary["pps"].Mean <= 0 {
			t.Errorf("%s/%s %s: %d runs, pps %+v", r.Layout, r.Mode, r.Workload, len(r.Runs), r.Summary["pps"])
		}
		for _, run := range r.Runs {
			if len(run.CPU) != f.Machine.Cores {
				t.Errorf("%s/%s %s: %d CPUs in a run, machine has %d", r.Layout, r.Mode, r.Workload, len(run.CPU), f.Machine.Cores)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	f, err := schema.ReadFile("../render/testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	var table1 bytes.Buffer
	if err := render.WriteTable(&table1, f); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := schema.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := schema.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var table2 bytes.Buffer
	if err := render.WriteTable(&table2, g); err != nil {
		t.Fatal(err)
	}
	if table1.String() != table2.String() {
		t.Errorf("table changed across write and read:\n%s\nvs\n%s", table1.String(), table2.String())
	}
	path2 := filepath.Join(t.TempDir(), "r2.json")
	if err := schema.WriteFile(path2, g); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(path)
	b2, _ := os.ReadFile(path2)
	if !bytes.Equal(b1, b2) {
		t.Error("JSON changed across read and write")
	}
	// Summaries recomputed from the runs equal the stored ones: the file
	// holds everything needed to re-plot.
	for _, r := range g.Results {
		stored := r.Summary
		r.Summarize()
		for k, s := range stored {
			if r.Summary[k] != s {
				t.Errorf("%s/%s %s %s: stored %+v, recomputed %+v", r.Layout, r.Mode, r.Workload, k, s, r.Summary[k])
			}
		}
	}
}

func TestReadFileRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"garbage.json": "not json",
		"other.json":   `{"foo": 1}`,
		"future.json":  `{"format": 99, "results": []}`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := schema.ReadFile(p); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	if _, err := schema.ReadFile(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestSummarizeAndNormalize(t *testing.T) {
	run := func(pps float64, soft float64) schema.Run {
		return schema.Run{WindowS: 2, PPS: pps, Gbps: pps / 1e6, CPU: map[int]procfs.CPUWindow{
			0: {Usage: procfs.CPUUsage{Soft: soft, Idle: 100 - soft}, NetRX: 100},
		}}
	}
	results := []schema.Result{
		{Layout: "host", Mode: "vanilla", Workload: "udp-stress", Size: 16, Flows: 1, Runs: []schema.Run{run(100, 10), run(110, 20), run(90, 30)}},
		{Layout: "docker", Mode: "vanilla", Workload: "udp-stress", Size: 16, Flows: 1, Runs: []schema.Run{run(50, 40), run(50, 60)}},
		{Layout: "docker", Mode: "vanilla", Workload: "udp-stress", Size: 1400, Flows: 1, Runs: []schema.Run{run(40, 40), run(60, 60)}},
		{Layout: "docker", Mode: "falcon", Workload: "udp-stress", Size: 1400, Flows: 1, Runs: []schema.Run{run(80, 40), run(80, 60)}},
		{Layout: "docker", Mode: "falcon", Workload: "tcp", Size: 1400, Flows: 1, Runs: []schema.Run{}},
	}
	for i := range results {
		results[i].Summarize()
	}
	s := results[0].Summary
	if s["pps"].Mean != 100 || s["pps"].N != 3 || s["cpu0_soft"].Mean != 20 || s["cpu0_net_rx"].Mean != 50 || s["cpu0_busy"].Mean != 20 {
		t.Errorf("summary: pps %+v soft %+v net_rx %+v", s["pps"], s["cpu0_soft"], s["cpu0_net_rx"])
	}
	if want := 4.30265272991127 * 10 / math.Sqrt(3); math.Abs(s["pps"].CI95-want) > 1e-9 {
		t.Errorf("ci95 %v, want %v", s["pps"].CI95, want)
	}

	schema.Normalize(results, "auto")
	// The host is its own baseline: 1, with its relative interval.
	if n := results[0].Normalized["pps"]; results[0].Baseline != "host/vanilla" || n.Mean != 1 || math.Abs(n.CI95-s["pps"].CI95/100) > 1e-12 {
		t.Errorf("host normalised: %s %+v", results[0].Baseline, n)
	}
	if n := results[1].Normalized["pps"]; results[1].Baseline != "host/vanilla" || n.Mean != 0.5 {
		t.Errorf("docker 16 B: %s %+v", results[1].Baseline, n)
	}
	// No host result at 1400 B: vanilla of the same layout.
	if n := results[3].Normalized["pps"]; results[3].Baseline != "docker/vanilla" || n.Mean != 1.6 {
		t.Errorf("falcon 1400 B: %s %+v", results[3].Baseline, n)
	}
	want := stats.Normalize(results[3].Summary["pps"], results[2].Summary["pps"])
	if results[3].Normalized["pps"] != want {
		t.Errorf("falcon 1400 B interval %+v, want %+v", results[3].Normalized["pps"], want)
	}
	if results[4].Baseline != "" || results[4].Normalized != nil {
		t.Errorf("a case without runs or baseline got normalised: %+v", results[4])
	}

	schema.Normalize(results, "docker/vanilla")
	if n := results[0].Normalized["pps"]; results[0].Baseline != "docker/vanilla" || n.Mean != 2 {
		t.Errorf("host vs docker baseline: %s %+v", results[0].Baseline, n)
	}
}

func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false, false, 2, 0)
	p.Stage("case 1/1")
	p.RunDone("first")
	p.Note("a note")
	p.RunDone("second")
	p.Close()
	if got, want := b.String(), "[1/2] first\na note\n[2/2] second\n"; got != want {
		t.Errorf("log output %q, want %q", got, want)
	}
	b.Reset()
	p = NewProgress(&b, true, false, 2, 0)
	p.Stage("case 1/1 · run 1/2")
	p.RunDone("first")
	p.Close()
	if s := b.String(); !strings.Contains(s, "\r\033[K[") || !strings.Contains(s, "1/2 runs") || !strings.HasSuffix(s, "\r\033[K") {
		t.Errorf("terminal output %q", s)
	}
	b.Reset()
	p = NewProgress(&b, true, true, 2, 0)
	p.RunDone("first")
	p.Close()
	if b.Len() != 0 {
		t.Errorf("quiet progress wrote %q", b.String())
	}
}
