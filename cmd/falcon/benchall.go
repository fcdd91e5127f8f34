package main

import (
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
	var est time.Duration
	runs, toRun, fromOthers := 0, 0, 0
	for i := range benches {
		fb := &benches[i]
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
		toRun++
		if fb.From != "" {
			fromOthers++
		} else {
			n := bench.CountRuns(plan, fb.Config)
			runs += n
			est += time.Duration(n) * bench.EstimateRun(fb.Config)
		}
	}
	done := 0
	for _, fb := range benches {
		if fb.Done != "" {
			done++
		}
	}
	if toRun == 0 && done == 0 {
		return errors.New("paper-all: no figure can run on this machine")
	}
	note := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	note("falcon bench: %s: %d figures, %d to run (%d drawn from another's bench; %d runs, about %s besides building testbeds), %d complete already, %d not runnable here; results in %s",
		bench.PaperAll, len(benches), toRun, fromOthers, runs, est.Round(time.Minute), done, len(benches)-toRun-done, dir)
	ctx, stop := interruptible(note)
	defer stop()

	var errs []error
	var summary []string
	// drawn writes the files of the figures drawn from preset's bench, of
	// results f.
	written := map[string]bool{}
	drawn := func(preset string, f *schema.File) {
		for _, fb := range benches {
			if fb.From != preset || fb.Done != "" || fb.Skip != "" {
				continue
			}
			written[fb.Preset] = true
			summary = append(summary, fmt.Sprintf("%s (%s %s): drawn from the bench of %s, %s", fb.Preset, fb.Paper, fb.Figure, fb.From, fb.File))
			if err := schema.WriteFile(fb.File, bench.FromFile(fb, f)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", fb.Preset, err))
			}
		}
	}
	// A figure drawn from a bench that stands complete is written before
	// anything runs: it does not wait on the benches before its source's
	// turn, which an interrupt may never reach.
	for _, fb := range benches {
		if fb.Done != "" {
			if f, err := schema.ReadFile(fb.File); err == nil {
				drawn(fb.Preset, f)
			}
		}
	}
	for i, fb := range benches {
		tag := fmt.Sprintf("%s (%s %s, %d/%d)", fb.Preset, fb.Paper, fb.Figure, i+1, len(benches))
		if ctx.Err() != nil {
			summary = append(summary, tag+": not started, interrupted")
			continue
		}
		if fb.Done != "" {
			note("falcon bench: %s: not run again: %s", tag, fb.Done)
			summary = append(summary, tag+": "+fb.Done)
			continue
		}
		if fb.Skip != "" {
			note("falcon bench: %s: not run: %s", tag, fb.Skip)
			summary = append(summary, tag+": not run: "+fb.Skip)
			if err := schema.WriteFile(fb.File, bench.NotRunFile(fb, version, commandLine())); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", fb.Preset, err))
			}
			continue
		}
		if fb.From != "" && written[fb.Preset] {
			note("falcon bench: %s: drawn from the complete bench of %s into %s", tag, fb.From, fb.File)
			continue
		}
		if fb.From != "" {
			note("falcon bench: %s: drawn from the bench of %s, once that has run", tag, fb.From)
			continue
		}
		cfg := fb.Config
		plan, _, _ := bench.Plan(cfg)
		p := bench.NewProgress(os.Stderr, bench.IsTerminal(os.Stderr), cfg.Quiet, bench.CountRuns(plan, cfg), bench.EstimateRun(cfg))
		p.Label(fmt.Sprintf("%s %d/%d ", fb.Preset, i+1, len(benches)))
		p.Note("falcon bench: %s: %d runs, about %s", tag, bench.CountRuns(plan, cfg),
			(time.Duration(bench.CountRuns(plan, cfg)) * bench.EstimateRun(cfg)).Round(time.Second))
		start := time.Now()
		opts := bench.RunOptions{Version: version, Command: commandLine(), Progress: p,
			Checkpoint: func(f *schema.File) error { return schema.WriteFile(fb.File, f) }}
		f, runErr := bench.Execute(ctx, cfg, opts)
		p.Close()
		took := time.Since(start).Round(time.Second)
		if runErr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fb.Preset, runErr))
		}
		if f == nil {
			summary = append(summary, fmt.Sprintf("%s: failed after %s: %v", tag, took, runErr))
			continue
		}
		if err := schema.WriteFile(fb.File, f); err != nil {
			errs = append(errs, fmt.Errorf("%s: write results: %w", fb.Preset, err))
		}
		drawn(fb.Preset, f)
		state := "ran"
		if runErr != nil {
			state = "ran with failures"
		}
		summary = append(summary, fmt.Sprintf("%s: %s in %s, %s", tag, state, took, fb.File))
		fmt.Printf("\n## %s: %s %s\n\n", fb.Preset, fb.Paper, fb.Figure)
		if err := bench.WriteTable(os.Stdout, f); err != nil {
			errs = append(errs, err)
		}
	}
	for _, fb := range benches {
		if fb.From != "" && fb.Done == "" && fb.Skip == "" && !written[fb.Preset] {
			summary = append(summary, fmt.Sprintf("%s (%s %s): not drawn: the bench of %s did not run", fb.Preset, fb.Paper, fb.Figure, fb.From))
		}
	}
	note("\nfalcon bench: %s:", bench.PaperAll)
	for _, s := range summary {
		note("  %s", s)
	}
	note("(re-render each with 'falcon report FILE')")
	return errors.Join(errs...)
}
