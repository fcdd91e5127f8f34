package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
)

// PaperAllOptions are what a paper-all run takes from its command.
type PaperAllOptions struct {
	Version, Command string
	Note             func(format string, a ...any) // progress lines
	Stderr           *os.File                      // each figure's progress
	Out              io.Writer                     // each figure's table
}

// RunPaperAll runs every figure's preset in turn (--preset paper-all), each
// a bench of its own into its file, after PreflightPaperAll has marked
// what cannot run here: a figure that cannot run gets a file with no
// results and the reason in its notes, one drawn from another's bench is
// written from that bench's results.
func RunPaperAll(ctx context.Context, benches []FigureBench, opts PaperAllOptions) error {
	pa := &paperAll{PaperAllOptions: opts, benches: benches, written: map[string]bool{}}
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
	PaperAllOptions
	benches []FigureBench
	written map[string]bool // figures drawn from another's results, written
	summary []string
	errs    []error
}

// PaperAllCounts is what a paper-all run has to do: its runs, and about
// how long they take besides building testbeds.
type PaperAllCounts struct {
	Runs, ToRun, FromOthers, Done int
	Est                           time.Duration
}

// PreflightPaperAll marks the figures this machine cannot run (Skip), and
// counts the rest.
func PreflightPaperAll(benches []FigureBench) PaperAllCounts {
	var c PaperAllCounts
	for i := range benches {
		fb := &benches[i]
		if fb.Done != "" {
			c.Done++
		}
		if fb.Skip != "" || fb.Done != "" {
			continue
		}
		if err := Preflight(fb.Config); err != nil {
			fb.Skip = fmt.Sprintf("%s %s cannot run on this machine: %v", fb.Paper, fb.Figure, err)
			continue
		}
		plan, _, err := Plan(fb.Config)
		if err != nil {
			fb.Skip = fmt.Sprintf("%s %s cannot run on this machine: %v", fb.Paper, fb.Figure, err)
			continue
		}
		c.ToRun++
		if fb.From != "" {
			c.FromOthers++
		} else {
			n := CountRuns(plan, fb.Config)
			c.Runs += n
			c.Est += time.Duration(n) * EstimateRun(fb.Config)
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
		if err := schema.WriteFile(fb.File, FromFile(fb, f)); err != nil {
			pa.errs = append(pa.errs, fmt.Errorf("%s: %w", fb.Preset, err))
		}
	}
}

// figure runs the i-th figure's bench, or says why it does not.
func (pa *paperAll) figure(ctx context.Context, i int, fb FigureBench) {
	tag := fmt.Sprintf("%s (%s %s, %d/%d)", fb.Preset, fb.Paper, fb.Figure, i+1, len(pa.benches))
	switch {
	case ctx.Err() != nil:
		pa.summary = append(pa.summary, tag+": not started, interrupted")
	case fb.Done != "":
		pa.Note("falcon-lab bench: %s: not run again: %s", tag, fb.Done)
		pa.summary = append(pa.summary, tag+": "+fb.Done)
	case fb.Skip != "":
		pa.Note("falcon-lab bench: %s: not run: %s", tag, fb.Skip)
		pa.summary = append(pa.summary, tag+": not run: "+fb.Skip)
		if err := schema.WriteFile(fb.File, NotRunFile(fb, pa.Version, pa.Command)); err != nil {
			pa.errs = append(pa.errs, fmt.Errorf("%s: %w", fb.Preset, err))
		}
	case fb.From != "" && pa.written[fb.Preset]:
		pa.Note("falcon-lab bench: %s: drawn from the complete bench of %s into %s", tag, fb.From, fb.File)
	case fb.From != "":
		pa.Note("falcon-lab bench: %s: drawn from the bench of %s, once that has run", tag, fb.From)
	default:
		pa.run(ctx, i, tag, fb)
	}
}

// run runs one figure's own bench, writes its file and prints its table.
func (pa *paperAll) run(ctx context.Context, i int, tag string, fb FigureBench) {
	cfg := fb.Config
	plan, _, _ := Plan(cfg)
	n := CountRuns(plan, cfg)
	p := NewProgress(pa.Stderr, IsTerminal(pa.Stderr), cfg.Quiet, n, EstimateRun(cfg))
	p.Label(fmt.Sprintf("%s %d/%d ", fb.Preset, i+1, len(pa.benches)))
	p.Note("falcon-lab bench: %s: %d runs, about %s", tag, n, (time.Duration(n) * EstimateRun(cfg)).Round(time.Second))
	start := time.Now()
	opts := RunOptions{Version: pa.Version, Command: pa.Command, Progress: p,
		Checkpoint: func(f *schema.File) error { return schema.WriteFile(fb.File, f) }}
	f, runErr := Execute(ctx, cfg, opts)
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
	fmt.Fprintf(pa.Out, "\n## %s: %s %s\n\n", fb.Preset, fb.Paper, fb.Figure)
	if err := render.WriteTable(pa.Out, f); err != nil {
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
	pa.Note("\nfalcon bench: %s:", PaperAll)
	for _, s := range pa.summary {
		pa.Note("  %s", s)
	}
	pa.Note("(re-render each with 'falcon-lab report FILE')")
}
