package bench

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/papers"
	"github.com/falconnet/falcon/lab/schema"
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
