package bench

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
)

// TestPaperAll: --preset paper-all lists every figure in the table's order,
// each with its results file in the --json directory, the flags given
// applied to each; those that cannot run say why, in a results file the
// report reads.
func TestPaperAll(t *testing.T) {
	dir := t.TempDir()
	for _, cpus := range []int{2, 16} {
		checkPaperAllBenches(t, dir, cpus)
	}
	// The one preset's values do not leak into the next figure's; a
	// figure whose cases another's bench runs with the same settings is
	// drawn from its runs, from the bench of most cases.
	benches, _ := parsePaperAll(t, "--preset", PaperAll, "--json", dir).ResolvePaperAll(seqN(2))
	from := map[string]string{}
	by := map[string]FigureBench{}
	for _, fb := range benches {
		if fb.Preset == "fig11" && (fb.Config.Runs != 5 || !reflect.DeepEqual(fb.Config.Sizes, []int{16, 1400})) {
			t.Errorf("fig11 after others: %+v", fb.Config)
		}
		if fb.From != "" {
			from[fb.Preset] = fb.From
		}
		by[fb.Preset] = fb
	}
	want := map[string]string{"fig11": "fig10", "fig17": "mflow11", "fig18": "mflow13", "mflow12": "mflow10",
		"k8s4": "k8s6", "k8s5": "k8s6", "hotcloud4": "hotcloud3", "hotcloud6": "hotcloud9",
		"hotcloud8": "hotcloud7", "hotcloud10": "hotcloud9", "hotcloud11": "hotcloud9"}
	if !reflect.DeepEqual(from, want) {
		t.Errorf("drawn from %v, want %v", from, want)
	}
	checkDrawnFile(t, by["mflow10"], by["mflow12"])
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--preset", PaperAll}, "--json DIR"},
		{[]string{"--preset", PaperAll, "--json", dir, "--runs", "0"}, "--runs 0"},
		{[]string{"--preset", PaperAll, "--json", dir, "--calibrate"}, "--calibrate"},
	} {
		var ce *ConfigError
		if _, err := parsePaperAll(t, c.args...).ResolvePaperAll(seqN(2)); !errors.As(err, &ce) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v; want a ConfigError saying %q", c.args, err, c.msg)
		}
	}
	if _, err := resolve(t, seqN(2), "--preset", PaperAll); err == nil || !strings.Contains(err.Error(), "--json DIR") {
		t.Errorf("Resolve with paper-all: %v", err)
	}
	checkNotRunFile(t, dir, by["k8s3"])
	if p, fig, ok := FigureOf("fig16"); !ok || p != "FALCON" || fig != "Fig. 16" {
		t.Errorf("FigureOf(fig16) = %s %s %v", p, fig, ok)
	}
}

// parsePaperAll parses bench's flags.
func parsePaperAll(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkPaperAllBenches: paper-all on cpus CPUs is a bench per figure, in
// the table's order, each with its file, the flags given applied, and the
// figures that cannot run here skipped with their reason.
func checkPaperAllBenches(t *testing.T, dir string, cpus int) {
	t.Helper()
	f := parsePaperAll(t, "--preset", PaperAll, "--json", dir, "--quick", "--quiet")
	if !f.PaperAll() {
		t.Fatal("PaperAll() is false")
	}
	benches, err := f.ResolvePaperAll(seqN(cpus))
	if err != nil {
		t.Fatal(err)
	}
	if len(benches) != len(figureTable) {
		t.Fatalf("%d benches for %d figures", len(benches), len(figureTable))
	}
	for i, fb := range benches {
		r := figureTable[i]
		if fb.Preset != r.name || fb.Paper != r.paper || fb.Figure != r.figure || fb.File != filepath.Join(dir, r.name+".json") {
			t.Errorf("bench %d: %+v, want %s", i, fb, r.name)
		}
		switch why := r.refusal(); {
		case why != "" && fb.Skip != why:
			t.Errorf("%s: skip %q, want %q", r.name, fb.Skip, why)
		case why == "" && fb.Skip != "":
			t.Errorf("%s does not run on %d CPUs: %s", r.name, cpus, fb.Skip)
		case why == "" && (!fb.Config.Quick || !fb.Config.Quiet || fb.Config.Runs != 1 || fb.Config.Preset != r.name || fb.Config.JSON != fb.File):
			t.Errorf("%s: flags given not applied: %+v", r.name, fb.Config)
		}
	}
}

// checkDrawnFile: mflow12 (docker, 3 modes, 64 KiB, 5-20 flows) drawn from
// mflow10 (host and docker, 4 modes, 3 sizes, 1-20 flows): its cases only,
// divided by docker/vanilla (mflow10's auto baseline is host/vanilla).
func checkDrawnFile(t *testing.T, m10, m12 FigureBench) {
	t.Helper()
	run := &schema.File{Format: schema.Format, Config: m10.Config, Notes: []string{"x"}}
	for _, tp := range mustPlan(t, m10.Config) {
		for _, c := range tp.Cases {
			r := schema.Result{Layout: c.Layout, Mode: c.Mode, Workload: c.Workload, Size: c.Size, Flows: c.Flows,
				Runs: []schema.Run{{Round: 1}}, Summary: map[string]stats.Summary{"gbps": {Mean: float64(c.Flows), N: 1}}}
			if c.Layout == "host" {
				r.Summary["gbps"] = stats.Summary{Mean: 100, N: 1}
			}
			run.Results = append(run.Results, r)
		}
	}
	schema.Normalize(run.Results, m10.Config.Baseline)
	ff := FromFile(m12, run)
	if ff.Config.Preset != "mflow12" || ff.Config.JSON != m12.File || !reflect.DeepEqual(ff.Config.Layouts, []string{"docker"}) ||
		len(ff.Results) != 9 || !strings.Contains(ff.Notes[0], "drawn from the bench of mflow10") || len(ff.Notes) != 2 ||
		run.Config.Preset != "mflow10" || len(run.Notes) != 1 || len(run.Results) != 60 {
		t.Errorf("drawn file %+v (of %+v)", ff, run)
	}
	for _, r := range ff.Results {
		if r.Layout != "docker" || r.Mode == "rps" || r.Size != 64<<10 || r.Flows < 5 || r.Baseline != "docker/vanilla" ||
			r.Normalized["gbps"].Mean != 1 {
			t.Errorf("drawn result %+v", r)
		}
	}
	for _, r := range run.Results {
		if r.Layout == "docker" && r.Baseline != "host/vanilla" {
			t.Errorf("the bench's own result changed: %+v", r)
		}
	}
}

// checkNotRunFile: a figure that cannot run (k8s3's) leaves a results file
// saying why.
func checkNotRunFile(t *testing.T, dir string, fb FigureBench) {
	t.Helper()
	path := filepath.Join(dir, "k8s3.json")
	if err := schema.WriteFile(path, NotRunFile(fb, "test", "falcon-lab bench --preset paper-all")); err != nil {
		t.Fatal(err)
	}
	back, err := schema.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := render.WriteTable(&out, back); err != nil {
		t.Fatal(err)
	}
	if back.Config.Preset != "k8s3" || !strings.Contains(out.String(), "not run: K8s RPS/RFS Fig. 3 is the study's setup drawn as a diagram") {
		t.Errorf("not-run file: preset %q, table:\n%s", back.Config.Preset, out.String())
	}
}

// TestPaperAllResume: --resume leaves out a figure whose file holds its
// bench to the end, and runs again one interrupted, a checkpoint, one with
// a failed case, one that lacks a case this falcon plans (a newer falcon's
// Host+ rows), and one of other flags; --resume alone is refused.
func TestPaperAllResume(t *testing.T) {
	dir := t.TempDir()
	resolve := func(args ...string) []FigureBench {
		t.Helper()
		b, err := parsePaperAll(t, append([]string{"--preset", PaperAll, "--json", dir}, args...)...).ResolvePaperAll(seqN(2))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	by := func(bs []FigureBench, name string) FigureBench {
		t.Helper()
		i := slices.IndexFunc(bs, func(b FigureBench) bool { return b.Preset == name })
		if i < 0 {
			t.Fatalf("no %s", name)
		}
		return bs[i]
	}
	complete := func(fb FigureBench) *schema.File { return completeFile(t, fb) }
	first := resolve("--quick")
	edits := map[string]func(*schema.File){
		"fig4":  func(*schema.File) {},
		"fig10": func(f *schema.File) { f.Interrupted = true },
		"fig11": func(f *schema.File) { f.Partial = true },
		"fig12": func(f *schema.File) { f.Results[0].Errors = []string{"run 1/1: boom"} },
		"fig13": func(f *schema.File) {
			f.Results = slices.DeleteFunc(f.Results, func(r schema.Result) bool { return r.Layout == "host" && r.Mode == "falcon+split" })
		},
		"fig15": func(f *schema.File) { f.Config.Runs = 3 },
	}
	for name, edit := range edits {
		fb := by(first, name)
		f := complete(fb)
		edit(f)
		if err := schema.WriteFile(fb.File, f); err != nil {
			t.Fatal(err)
		}
	}
	again := resolve("--quick", "--resume")
	for name := range edits {
		if done := by(again, name).Done; (name == "fig4") != (done != "") {
			t.Errorf("%s: done %q", name, done)
		}
	}
	if d := by(again, "fig4").Done; !strings.Contains(d, "complete in "+by(again, "fig4").File) {
		t.Errorf("fig4: %q", d)
	}
	// A figure drawn from another's bench stands once its file is written.
	if fb := by(again, "hotcloud11"); fb.From != "hotcloud9" || fb.Done != "" {
		t.Fatalf("hotcloud11 before: %+v", fb)
	}
	if err := schema.WriteFile(by(again, "hotcloud11").File, FromFile(by(again, "hotcloud11"), complete(by(again, "hotcloud9")))); err != nil {
		t.Fatal(err)
	}
	if d := by(resolve("--quick", "--resume"), "hotcloud11").Done; d == "" {
		t.Error("hotcloud11 drawn from a complete hotcloud9: not done")
	}
	// Without --quick the flags differ from the file's: run again.
	if d := by(resolve("--resume"), "fig4").Done; d != "" {
		t.Errorf("fig4 with other flags: done %q", d)
	}
	if _, err := parsePaperAll(t, "--preset", "fig4", "--resume").Resolve(seqN(2)); err == nil || !strings.Contains(err.Error(), "--resume takes up --preset paper-all") {
		t.Errorf("--resume on one bench: %v", err)
	}
}

// completeFile is a file with a result for every case the figure's bench
// plans.
func completeFile(t *testing.T, fb FigureBench) *schema.File {
	t.Helper()
	plan, _, err := Plan(fb.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &schema.File{Format: schema.Format, FalconVersion: "test", Started: time.Now().Add(-time.Minute), Finished: time.Now(), Config: fb.Config}
	for _, tp := range plan {
		for _, c := range tp.Cases {
			f.Results = append(f.Results, schema.Result{Layout: c.Layout, Mode: c.Mode, Workload: c.Workload, Size: c.Size, Flows: c.Flows})
		}
	}
	return f
}
