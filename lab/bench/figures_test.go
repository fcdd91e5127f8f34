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

	"github.com/falconnet/falcon/lab/papers"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
)

func seqN(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestFigurePresetsCoverPapers: every figure lab/papers holds has one
// preset, runnable or saying why not, and every preset names a figure
// there.
func TestFigurePresetsCoverPapers(t *testing.T) {
	type key struct{ paper, figure string }
	inPapers := map[key]bool{}
	for _, f := range papers.All() {
		inPapers[key{f.Paper, f.Figure}] = true
	}
	rows, names := map[key]string{}, map[string]bool{}
	for _, r := range figureTable {
		k := key{r.paper, r.figure}
		if !inPapers[k] {
			t.Errorf("preset %s: %s is not a figure of lab/papers", r.name, r.title())
		}
		if prev, dup := rows[k]; dup {
			t.Errorf("%s has two presets, %s and %s", r.title(), prev, r.name)
		}
		if names[r.name] {
			t.Errorf("preset %s twice", r.name)
		}
		rows[k], names[r.name] = r.name, true
		if figureSetups[r.paper] == "" {
			t.Errorf("preset %s: no setup for paper %q", r.name, r.paper)
		}
		_, runnable := presets[r.name]
		switch why := r.refusal(); {
		case why == "" && !runnable:
			t.Errorf("preset %s neither runs nor says why", r.name)
		case why != "" && runnable:
			t.Errorf("preset %s runs, yet refuses: %s", r.name, why)
		case r.needs != "" && r.nothing != "":
			t.Errorf("preset %s: needs and nothing both set", r.name)
		}
		if r.base != "" {
			if _, fig := lookupFigure(r.base); fig || presets[r.base].flags == nil {
				t.Errorf("preset %s: base %q is not a topic preset", r.name, r.base)
			}
		}
		if runnable && r.what == "" && (r.base != "" || r.flags != nil) {
			t.Errorf("preset %s: values but no help", r.name)
		}
	}
	for k := range inPapers {
		if rows[k] == "" {
			t.Errorf("%s %s has no preset", k.paper, k.figure)
		}
	}
	for _, want := range []string{"fig10", "fig19", "mflow4", "mflow13", "k8s6", "hotcloud3", "hotcloud11"} {
		if !names[want] {
			t.Errorf("no preset %s", want)
		}
	}
}

// TestFigurePresetsResolve: each runnable figure preset resolves on 2 CPUs
// and on 16, and its help names the figure and how this setup differs;
// the others refuse with the reason, before anything is built.
func TestFigurePresetsResolve(t *testing.T) {
	help := PresetHelp()
	for _, r := range figureTable {
		if !strings.Contains(help, "  "+r.name+" ") || !strings.Contains(help, r.title()) {
			t.Errorf("the help does not list %s (%s)", r.name, r.title())
		}
		if why := r.refusal(); why != "" {
			_, err := resolve(t, seqN(2), "--preset", r.name)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), why) {
				t.Errorf("preset %s: %v; want a refusal saying %q", r.name, err, why)
			}
			continue
		}
		s := presets[r.name].summary
		if !strings.Contains(s, r.title()) || !strings.Contains(s, "100 G") && !strings.Contains(s, "VM") && !strings.Contains(s, "40 G") {
			t.Errorf("preset %s: the help does not name the figure or the paper's setup: %s", r.name, s)
		}
		for _, cpus := range []int{2, 16} {
			c, err := resolve(t, seqN(cpus), "--preset", r.name)
			if err != nil {
				t.Errorf("preset %s on %d CPUs: %v", r.name, cpus, err)
				continue
			}
			if c.Preset != r.name {
				t.Errorf("preset %s recorded as %q", r.name, c.Preset)
			}
			for k, v := range r.flags {
				if k == "workloads" && strings.Join(c.Workloads, ",") != v {
					t.Errorf("preset %s: workloads %v, want %s", r.name, c.Workloads, v)
				}
			}
		}
	}
	// A base's values under the figure's own; the figure's win.
	c, err := resolve(t, seqN(2), "--preset", "fig13")
	if err != nil || !reflect.DeepEqual(c.Flows, []int{1, 2, 4, 8}) || len(c.Modes) != 3 || c.Modes[2] != "falcon+split" {
		t.Errorf("fig13: %+v, %v", c, err)
	}
	// Fig. 14 received on 6 cores: on 16 CPUs every CPU the senders leave.
	c, err = resolve(t, seqN(16), "--preset", "fig14")
	if err != nil || !reflect.DeepEqual(c.ReceiverCPUs, seqN(16)[3:]) || !c.ContainersPerFlow {
		t.Errorf("fig14 on 16 CPUs: receivers %v, %v", c.ReceiverCPUs, err)
	}
	if c, err = resolve(t, seqN(2), "--preset", "fig14"); err != nil || !reflect.DeepEqual(c.ReceiverCPUs, []int{1}) {
		t.Errorf("fig14 on 2 CPUs: receivers %v, %v", c.ReceiverCPUs, err)
	}
	// MFLOW's application and packet-processing cores: on 16 CPUs the
	// scale placement, on 2 the roles share the CPUs as every preset's do.
	for _, name := range []string{"mflow10", "mflow12"} {
		c, err = resolve(t, seqN(16), "--preset", name)
		if err != nil || c.NICCPU == nil || *c.NICCPU != 4 || !reflect.DeepEqual(c.SenderCPUs, seqN(4)) ||
			!reflect.DeepEqual(c.ReceiverCPUs, []int{5, 6, 7, 8, 9}) || !reflect.DeepEqual(c.FalconCPUs, []int{10, 11, 12, 13, 14, 15}) {
			t.Errorf("%s on 16 CPUs: senders %v, NIC %v, receivers %v, falcon %v, %v", name, c.SenderCPUs, c.NICCPU, c.ReceiverCPUs, c.FalconCPUs, err)
		}
		if c, err = resolve(t, seqN(2), "--preset", name); err != nil || c.NICCPU != nil || c.FalconCPUs != nil {
			t.Errorf("%s on 2 CPUs: NIC %v, falcon %v, %v", name, c.NICCPU, c.FalconCPUs, err)
		}
	}
}

// TestFigurePresetRefusal: what a preset that cannot run says.
func TestFigurePresetRefusal(t *testing.T) {
	r := figurePreset{name: "figX", paper: "FALCON", figure: "Fig. 99", what: "w", needs: "the x workload"}
	if got, want := r.refusal(), "FALCON Fig. 99 needs the x workload, not built yet"; got != want {
		t.Errorf("refusal %q, want %q", got, want)
	}
	if s := r.summary(); !strings.HasPrefix(s, "(does not run) FALCON Fig. 99 needs the x workload") {
		t.Errorf("summary %q", s)
	}
	_, err := resolve(t, seqN(2), "--preset", "k8s3")
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--preset k8s3: K8s RPS/RFS Fig. 3 is the study's setup drawn as a diagram") {
		t.Errorf("k8s3: %v", err)
	}
}

// TestFigurePresetsNeedsStillMissing: a preset that refuses for want of
// something holds the setup it will run; once that setup resolves, what it
// needs has been built and its needs line should go.
func TestFigurePresetsNeedsStillMissing(t *testing.T) {
	for _, r := range figureTable {
		if r.needs == "" {
			continue
		}
		if r.flags == nil {
			t.Errorf("preset %s needs %s but holds no setup to run once it is built", r.name, r.needs)
			continue
		}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := RegisterFlags(fs)
		var err error
		for k, v := range r.flags {
			if e := fs.Set(k, v); e != nil {
				err = e // a flag not built yet
			}
		}
		if err == nil {
			_, err = f.Resolve(seqN(2))
		}
		if err == nil {
			t.Errorf("preset %s: its setup resolves now, so what it needs (%s) is built: delete its needs line", r.name, r.needs)
		}
	}
}

// TestQuick: --quick makes every runnable preset one short run per case,
// long sweeps cut to three values, and flags given still win.
func TestQuick(t *testing.T) {
	if got := quickCut([]int{64, 1, 8, 2, 4}); !reflect.DeepEqual(got, []int{1, 4, 64}) {
		t.Errorf("quickCut: %v", got)
	}
	for _, l := range [][]int{nil, {7}, {3, 1, 2}} {
		if got := quickCut(l); !reflect.DeepEqual(got, l) {
			t.Errorf("quickCut(%v) = %v", l, got)
		}
	}
	if got := quickCutOrdered([]string{"1G", "100M", "2G", "500M"}); !reflect.DeepEqual(got, []string{"1G", "2G", "500M"}) {
		t.Errorf("quickCutOrdered: %v", got)
	}
	if c, err := resolve(t, seqN(2), "--preset", "fig19", "--quick"); err != nil || !reflect.DeepEqual(c.Rates, []string{"25Kpps", "100Kpps", "400Kpps"}) {
		t.Errorf("fig19 --quick: rates %v, %v", c.Rates, err)
	}
	var total time.Duration
	for _, name := range PresetNames() {
		if strings.HasPrefix(name, "scale") || name == "calibrate" {
			continue // 8+ CPUs; calibrate fixes its own runs
		}
		full, err := resolve(t, seqN(2), "--preset", name)
		if err != nil {
			t.Fatal(err)
		}
		q, err := resolve(t, seqN(2), "--preset", name, "--quick")
		if err != nil {
			t.Errorf("%s --quick: %v", name, err)
			continue
		}
		if !q.Quick || q.Runs != 1 || q.Duration != schema.Duration(time.Second) || q.Warmup != schema.Duration(500*time.Millisecond) {
			t.Errorf("%s --quick: %d runs of %s after %s", name, q.Runs, q.Duration, q.Warmup)
		}
		for what, l := range map[string][2][]int{"sizes": {full.Sizes, q.Sizes}, "flows": {full.Flows, q.Flows}} {
			f, g := l[0], l[1]
			if len(g) > 3 || slices.Min(g) != slices.Min(f) || slices.Max(g) != slices.Max(f) {
				t.Errorf("%s --quick: %s %v from %v", name, what, g, f)
			}
			for _, v := range g {
				if !slices.Contains(f, v) {
					t.Errorf("%s --quick: %s %v from %v", name, what, g, f)
				}
			}
		}
		if !reflect.DeepEqual(q.Modes, full.Modes) || !reflect.DeepEqual(q.Layouts, full.Layouts) || !reflect.DeepEqual(q.Workloads, full.Workloads) {
			t.Errorf("%s --quick changed what is compared: %+v", name, q)
		}
		fp, qp := mustPlan(t, full), mustPlan(t, q)
		nf, nq := CountRuns(fp, full), CountRuns(qp, q)
		if nq >= nf && full.Runs > 1 {
			t.Errorf("%s --quick: %d runs, not fewer than %d", name, nq, nf)
		}
		d := time.Duration(nq) * EstimateRun(q)
		total += d
		t.Logf("%-12s --quick: %3d runs on %2d testbeds, about %s of runs (full: %d runs of %s)", name, nq, len(groupPlans(qp, q.Interleave)), d, nf, full.Duration)
	}
	t.Logf("all --quick: about %s of runs, besides building testbeds", total)

	c, err := resolve(t, seqN(2), "--quick", "--workloads", "udp,multi-flow", "--sizes", "16,64,256,1K,4K", "--flows", "1,2,3,4,5", "--runs", "2")
	if err != nil || !reflect.DeepEqual(c.Sizes, []int{16, 256, 4096}) || !reflect.DeepEqual(c.Flows, []int{1, 3, 5}) ||
		c.Runs != 2 || c.Duration != schema.Duration(time.Second) {
		t.Errorf("--quick with flags: %+v, %v", c, err)
	}
	if c, err = resolve(t, seqN(2), "--preset", "demo", "--quick", "--duration", "3s"); err != nil || c.Duration != schema.Duration(3*time.Second) || c.Runs != 1 {
		t.Errorf("--quick --duration 3s: %+v, %v", c, err)
	}
}

// TestPaperAll: --preset paper-all lists every figure in the table's order,
// each with its results file in the --json directory, the flags given
// applied to each; those that cannot run say why, in a results file the
// report reads.
func TestPaperAll(t *testing.T) {
	dir := t.TempDir()
	parse := func(args ...string) *Flags {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, cpus := range []int{2, 16} {
		f := parse("--preset", PaperAll, "--json", dir, "--quick", "--quiet")
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
	// The one preset's values do not leak into the next figure's; a
	// figure whose cases another's bench runs with the same settings is
	// drawn from its runs, from the bench of most cases.
	benches, _ := parse("--preset", PaperAll, "--json", dir).ResolvePaperAll(seqN(2))
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
	// mflow12 (docker, 3 modes, 64 KiB, 5-20 flows) from mflow10 (host
	// and docker, 4 modes, 3 sizes, 1-20 flows): its cases only, divided
	// by docker/vanilla (mflow10's auto baseline is host/vanilla).
	m10, m12 := by["mflow10"], by["mflow12"]
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
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--preset", PaperAll}, "--json DIR"},
		{[]string{"--preset", PaperAll, "--json", dir, "--runs", "0"}, "--runs 0"},
		{[]string{"--preset", PaperAll, "--json", dir, "--calibrate"}, "--calibrate"},
	} {
		var ce *ConfigError
		if _, err := parse(c.args...).ResolvePaperAll(seqN(2)); !errors.As(err, &ce) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v; want a ConfigError saying %q", c.args, err, c.msg)
		}
	}
	if _, err := resolve(t, seqN(2), "--preset", PaperAll); err == nil || !strings.Contains(err.Error(), "--json DIR") {
		t.Errorf("Resolve with paper-all: %v", err)
	}

	// A figure that cannot run leaves a results file saying why.
	var fb FigureBench
	for _, b := range benches {
		if b.Preset == "k8s3" {
			fb = b
		}
	}
	path := filepath.Join(dir, "k8s3.json")
	if err := schema.WriteFile(path, NotRunFile(fb, "test", "falcon bench --preset paper-all")); err != nil {
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
	if p, fig, ok := FigureOf("fig16"); !ok || p != "FALCON" || fig != "Fig. 16" {
		t.Errorf("FigureOf(fig16) = %s %s %v", p, fig, ok)
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
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := RegisterFlags(fs)
		if err := fs.Parse(append([]string{"--preset", PaperAll, "--json", dir}, args...)); err != nil {
			t.Fatal(err)
		}
		b, err := f.ResolvePaperAll(seqN(2))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	by := func(bs []FigureBench, name string) FigureBench {
		for _, b := range bs {
			if b.Preset == name {
				return b
			}
		}
		t.Fatalf("no %s", name)
		return FigureBench{}
	}
	// A file with a result for every case the figure's bench plans.
	complete := func(fb FigureBench) *schema.File {
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
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := RegisterFlags(fs)
	if err := fs.Parse([]string{"--preset", "fig4", "--resume"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Resolve(seqN(2)); err == nil || !strings.Contains(err.Error(), "--resume takes up --preset paper-all") {
		t.Errorf("--resume on one bench: %v", err)
	}
}
