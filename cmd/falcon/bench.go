package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/falconnet/falcon/internal/bench"
	"github.com/falconnet/falcon/internal/cpuset"
)

func init() {
	register(command{name: "bench", summary: "measure layouts × modes × workloads on fresh testbeds", run: runBench})
}

func runBench(args []string) error {
	fs := newFlagSet("bench", "[flags]")
	flags := bench.RegisterFlags(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(fs.Output(), "\nworkloads:\n%s\npresets:\n%s", bench.WorkloadHelp(), bench.PresetHelp())
		fmt.Fprintf(fs.Output(), "\nEach layout × mode gets a fresh testbed, removed afterwards (also on ctrl-C);\n"+
			"after a kill -9, 'falcon testbed down --all' cleans up.\n")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	online, err := cpuset.Online()
	if err != nil {
		return fmt.Errorf("online CPUs: %w", err)
	}
	cfg, err := flags.Resolve(online)
	if err != nil {
		var ce *bench.ConfigError
		if errors.As(err, &ce) {
			return usagef("%s", ce.Msg)
		}
		return err
	}
	if err := bench.Preflight(cfg); err != nil {
		return err
	}
	plan, _, err := bench.Plan(cfg)
	if err != nil {
		return err
	}
	p := bench.NewProgress(os.Stderr, bench.IsTerminal(os.Stderr), cfg.Quiet, bench.CountRuns(plan, cfg), bench.EstimateRun(cfg))
	defer p.Close()

	// The first signal stops the traffic; Execute then undoes the modes
	// and removes the testbeds before returning. Later signals must not
	// kill that cleanup.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for n := 0; ; n++ {
			if _, ok := <-sigs; !ok {
				return
			}
			if n == 0 {
				p.Note("falcon bench: interrupted: stopping traffic, undoing modes, removing testbeds …")
				cancel()
			} else {
				p.Note("falcon bench: still cleaning up, please wait")
			}
		}
	}()

	opts := bench.RunOptions{Version: version, Command: commandLine(), Progress: p}
	if cfg.JSON != "" {
		opts.Checkpoint = func(f *bench.File) error { return bench.WriteFile(cfg.JSON, f) }
	}
	f, runErr := bench.Execute(ctx, cfg, opts)
	p.Close()
	if f == nil {
		return runErr
	}
	if cfg.JSON != "" {
		if err := bench.WriteFile(cfg.JSON, f); err != nil {
			return errors.Join(runErr, fmt.Errorf("write results: %w", err))
		}
		fmt.Fprintf(os.Stderr, "falcon bench: results in %s (re-render with 'falcon report %s')\n", cfg.JSON, cfg.JSON)
	}
	if err := bench.WriteTable(os.Stdout, f); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// commandLine is how this run was invoked, shell-quoted where needed.
func commandLine() string {
	parts := []string{"falcon"}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
