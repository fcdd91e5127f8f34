package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/bench"
	"github.com/falconnet/falcon/lab/testbed"
)

// runPaperAll runs every figure's preset in turn (--preset paper-all), each
// a bench of its own into DIR/PRESET.json (--json DIR), so that falcon
// report reads each as it reads any results file; a figure that cannot run
// gets a file with no results and the reason in its notes. Flags given
// apply to every figure.
func runPaperAll(flags *bench.Flags, online []int, probe bool) error {
	if probe {
		return cli.Usagef("--probe checks one bench: name one figure's preset (e.g. --preset fig10 --probe)")
	}
	benches, err := flags.ResolvePaperAll(online)
	if err != nil {
		var ce *bench.ConfigError
		if errors.As(err, &ce) {
			return cli.Usagef("%s", ce.Msg)
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
	note := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	c := bench.PreflightPaperAll(benches)
	if c.ToRun == 0 && c.Done == 0 {
		return errors.New("paper-all: no figure can run on this machine")
	}
	note("falcon-lab bench: %s: %d figures, %d to run (%d drawn from another's bench; %d runs, about %s besides building testbeds), %d complete already, %d not runnable here; results in %s",
		bench.PaperAll, len(benches), c.ToRun, c.FromOthers, c.Runs, c.Est.Round(time.Minute), c.Done, len(benches)-c.ToRun-c.Done, dir)
	ctx, stop := interruptible(note)
	defer stop()
	return bench.RunPaperAll(ctx, benches, bench.PaperAllOptions{Version: version, Command: commandLine(),
		Note: note, Stderr: os.Stderr, Out: os.Stdout})
}
