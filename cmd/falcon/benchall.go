package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/falconnet/falcon/lab/bench"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
)

// runPaperAll runs every figure's preset in turn (--preset paper-all), each
// a bench of its own into DIR/PRESET.json (--json DIR), so that falcon
// report reads each as it reads any results file; a figure that cannot run
// gets a file with no results and the reason in its notes. Flags given
// apply to every figure.
func runPaperAll(flags *bench.Flags, online []int, probe bool) error {
	if probe {
		return usagef("--probe checks one bench: name one figure's preset (e.g. --preset fig10 --probe)")
	}
	benches, err := flags.ResolvePaperAll(online)
	if err != nil {
		var ce *bench.ConfigError
		if errors.As(err, &ce) {
			return usagef("%s", ce.Msg)
		}
		return err
	}
	// The system's own needs (root, ip) are every figure's. Then each
	// figure is checked before anything runs: one this machine cannot run
	// (a tool not installed, …) is said at the start, not hours in.
	if err := testbed.CheckSystem(); err != nil {
		return err
	}
	dir := filepath.Dir(benches[0].File)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pa := &paperAll{benches: benches, written: map[string]bool{},
		note: func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }}
	c := pa.preflight()
	if c.toRun == 0 && c.done == 0 {
		return errors.New("paper-all: no figure can run on this machine")
	}
	pa.note("falcon bench: %s: %d figures, %d to run (%d drawn from another's bench; %d runs, about %s besides building testbeds), %d complete already, %d not runnable here; results in %s",
		bench.PaperAll, len(benches), c.toRun, c.fromOthers, c.runs, c.est.Round(time.Minute), c.done, len(benches)-c.toRun-c.done, dir)
	ctx, stop := interruptible(pa.note)
	defer stop()
	// A figure drawn from a bench that stands complete is written before
	// anything runs: it does not wait on the benches before its source's
	// turn, which an interrupt may never reach.
	for _, fb := range benches {
		if fb.Done != "" {
			if f, err := schema.ReadFile(fb.File); err == nil {
				pa.drawn(fb.Preset, f)
			}
		}
	}
	for i, fb := range benches {
		pa.figure(ctx, i, fb)
	}
	pa.finish()
	return errors.Join(pa.errs...)
}

// paperAll is one paper-all run: the figures' benches and what became of
// each.
type paperAll struct {
	benches []bench.FigureBench
	written map[string]bool // figures drawn from another's results, written
	summary []string
	errs    []error
	note    func(format string, a ...any)
}

// paperCounts is what a paper-all run has to do.
type paperCounts struct {
	runs, toRun, fromOthers, done int
	est                           time.Duration
}

// preflight marks the figures this machine cannot run, and counts the
// rest.
func (pa *paperAll) preflight() paperCounts {
	var c paperCounts
	for i := range pa.benches {
		fb := &pa.benches[i]
		if fb.Done != "" {
			c.done++
		}
		if fb.Skip != "" || fb.Done != "" {
			continue
		}
		if err := bench.Preflight(fb.Config); err != nil {
			fb.Skip = fmt.Sprintf("%s %s cannot run on this machine: %v", fb.Paper, fb.Figure, err)
			continue
		}
		plan, _, err := bench.Plan(fb.Config)
		if err != nil {
			fb.Skip = fmt.Sprintf("%s %s cannot run on this machine: %v", fb.Paper, fb.Figure, err)
			continue
		}
		c.toRun++
		if fb.From != "" {
			c.fromOthers++
		} else {
			n := bench.CountRuns(plan, fb.Config)
			c.runs += n
			c.est += time.Duration(n) * bench.EstimateRun(fb.Config)
		}
	}
	return c
}

// drawn writes the files of the figures drawn from preset's bench, of
// results f.
func (pa *paperAll) drawn(preset string, f *schema.File) {
	for _, fb := range pa.benches {
		if fb.From != preset || fb.Done != "" || fb.Skip != "" {
			continue
		}
		pa.written[fb.Preset] = true
		pa.summary = append(pa.summary, fmt.Sprintf("%s (%s %s): drawn from the bench of %s, %s", fb.Preset, fb.Paper, fb.Figure, fb.From, fb.File))
		if err := schema.WriteFile(fb.File, bench.FromFile(fb, f)); err != nil {
			pa.errs = append(pa.errs, fmt.Errorf("%s: %w", fb.Preset, err))
		}
	}
}

// figure runs the i-th figure's bench, or says why it does not.
func (pa *paperAll) figure(ctx context.Context, i int, fb bench.FigureBench) {
	tag := fmt.Sprintf("%s (%s %s, %d/%d)", fb.Preset, fb.Paper, fb.Figure, i+1, len(pa.benches))
	switch {
	case ctx.Err() != nil:
		pa.summary = append(pa.summary, tag+": not started, interrupted")
	case fb.Done != "":
		pa.note("falcon bench: %s: not run again: %s", tag, fb.Done)
		pa.summary = append(pa.summary, tag+": "+fb.Done)
	case fb.Skip != "":
		pa.note("falcon bench: %s: not run: %s", tag, fb.Skip)
		pa.summary = append(pa.summary, tag+": not run: "+fb.Skip)
		if err := schema.WriteFile(fb.File, bench.NotRunFile(fb, version, commandLine())); err != nil {
			pa.errs = append(pa.errs, fmt.Errorf("%s: %w", fb.Preset, err))
		}
	case fb.From != "" && pa.written[fb.Preset]:
		pa.note("falcon bench: %s: drawn from the complete bench of %s into %s", tag, fb.From, fb.File)
	case fb.From != "":
		pa.note("falcon bench: %s: drawn from the bench of %s, once that has run", tag, fb.From)
	default:
		pa.run(ctx, i, tag, fb)
	}
}

// run runs one figure's own bench, writes its file and prints its table.
func (pa *paperAll) run(ctx context.Context, i int, tag string, fb bench.FigureBench) {
	cfg := fb.Config
	plan, _, _ := bench.Plan(cfg)
	n := bench.CountRuns(plan, cfg)
	p := bench.NewProgress(os.Stderr, bench.IsTerminal(os.Stderr), cfg.Quiet, n, bench.EstimateRun(cfg))
	p.Label(fmt.Sprintf("%s %d/%d ", fb.Preset, i+1, len(pa.benches)))
	p.Note("falcon bench: %s: %d runs, about %s", tag, n, (time.Duration(n) * bench.EstimateRun(cfg)).Round(time.Second))
	start := time.Now()
	opts := bench.RunOptions{Version: version, Command: commandLine(), Progress: p,
		Checkpoint: func(f *schema.File) error { return schema.WriteFile(fb.File, f) }}
	f, runErr := bench.Execute(ctx, cfg, opts)
	p.Close()
	took := time.Since(start).Round(time.Second)
	if runErr != nil {
		pa.errs = append(pa.errs, fmt.Errorf("%s: %w", fb.Preset, runErr))
	}
	if f == nil {
		pa.summary = append(pa.summary, fmt.Sprintf("%s: failed after %s: %v", tag, took, runErr))
		return
	}
	if err := schema.WriteFile(fb.File, f); err != nil {
		pa.errs = append(pa.errs, fmt.Errorf("%s: write results: %w", fb.Preset, err))
	}
	pa.drawn(fb.Preset, f)
	state := "ran"
	if runErr != nil {
		state = "ran with failures"
	}
	pa.summary = append(pa.summary, fmt.Sprintf("%s: %s in %s, %s", tag, state, took, fb.File))
	fmt.Printf("\n## %s: %s %s\n\n", fb.Preset, fb.Paper, fb.Figure)
	if err := bench.WriteTable(os.Stdout, f); err != nil {
		pa.errs = append(pa.errs, err)
	}
}

// finish says what became of every figure.
func (pa *paperAll) finish() {
	for _, fb := range pa.benches {
		if fb.From != "" && fb.Done == "" && fb.Skip == "" && !pa.written[fb.Preset] {
			pa.summary = append(pa.summary, fmt.Sprintf("%s (%s %s): not drawn: the bench of %s did not run", fb.Preset, fb.Paper, fb.Figure, fb.From))
		}
	}
	pa.note("\nfalcon bench: %s:", bench.PaperAll)
	for _, s := range pa.summary {
		pa.note("  %s", s)
	}
	pa.note("(re-render each with 'falcon report FILE')")
}
