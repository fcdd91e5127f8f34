package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/bench"
	"github.com/falconnet/falcon/lab/benchprobe"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

func init() {
	app.Register(cli.Command{Name: "bench", Summary: "measure layouts × modes × workloads on fresh testbeds", Run: runBench})
}

func runBench(args []string) error {
	fs := app.FlagSet("bench", "[flags]")
	flags := bench.RegisterFlags(fs)
	probe := fs.Bool("probe", false, "only check that this machine can run this bench (root, a real kernel, namespaces, veth, "+
		"VXLAN, bridges, BPF in tc, XDP, threaded NAPI, the tools, the CPUs) and list what is missing; "+
		"nothing is changed outside a scratch namespace")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(fs.Output(), "\nworkloads:\n%s\npresets:\n%s", workload.Help(), bench.PresetHelp())
		fmt.Fprintf(fs.Output(), "\nEach layout × mode gets a fresh testbed, removed afterwards (also on ctrl-C);\n"+
			"after a kill -9, 'falcon-lab testbed down --all' cleans up.\n")
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	online, err := cpuset.Online()
	if err != nil {
		return fmt.Errorf("online CPUs: %w", err)
	}
	if flags.PaperAll() {
		return runPaperAll(flags, online, *probe)
	}
	cfg, err := flags.Resolve(online)
	var ce *bench.ConfigError
	if *probe {
		var needs benchprobe.BenchNeeds
		switch {
		case err == nil:
			needs = bench.ProbeNeeds(cfg)
		case errors.As(err, &ce) && ce.NeedCPUs > 0:
			// The command line is right for a bigger machine: say what
			// else this one lacks too.
			needs = bench.ProbeNeedsAll(ce.Msg)
		case errors.As(err, &ce):
			return cli.Usagef("%s", ce.Msg)
		default:
			return err
		}
		return runProbe(benchprobe.NewMachineProber(), needs)
	}
	if err != nil {
		if errors.As(err, &ce) {
			return cli.Usagef("%s", ce.Msg)
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

	ctx, stop := interruptible(p.Note)
	defer stop()

	opts := bench.RunOptions{Version: version, Command: commandLine(), Progress: p}
	if cfg.JSON != "" {
		opts.Checkpoint = func(f *schema.File) error { return schema.WriteFile(cfg.JSON, f) }
	}
	f, runErr := bench.Execute(ctx, cfg, opts)
	p.Close()
	if f == nil {
		return runErr
	}
	if cfg.JSON != "" {
		if err := schema.WriteFile(cfg.JSON, f); err != nil {
			return errors.Join(runErr, fmt.Errorf("write results: %w", err))
		}
		fmt.Fprintf(os.Stderr, "falcon-lab bench: results in %s (re-render with 'falcon-lab report %s')\n", cfg.JSON, cfg.JSON)
	}
	if err := render.WriteTable(os.Stdout, f); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// interruptible is a context the first SIGINT, SIGTERM or SIGHUP
// cancels: that stops the traffic, and Execute then undoes the modes and
// removes the testbeds before returning. Later signals must not kill that
// cleanup; note says what is happening.
func interruptible(note func(format string, a ...any)) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return // done, not interrupted
		}
		// Whoever sent the signal may have closed our output too (run.sh's
		// tee, an ssh session): a write to a broken pipe must not kill the
		// cleanup, which Go's default SIGPIPE on stdout and stderr would.
		signal.Ignore(syscall.SIGPIPE)
		note("falcon-lab bench: interrupted: stopping traffic, undoing modes, removing testbeds …")
		cancel()
		for range sigs {
			note("falcon-lab bench: still cleaning up, please wait")
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

// commandLine is how this run was invoked, shell-quoted where needed.
func commandLine() string {
	parts := []string{"falcon-lab"}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// probeOut is where the probe's table goes (tests capture it).
var probeOut io.Writer = os.Stdout

// runProbe prints what the machine has for the bench and returns the list
// of what it lacks as the error (exit 1), nil when nothing needed is
// missing.
func runProbe(p interface {
	benchprobe.Prober
	Close() error
}, needs benchprobe.BenchNeeds) error {
	r := benchprobe.ProbeBench(p, needs)
	cerr := p.Close()
	if err := r.WriteText(probeOut); err != nil {
		return err
	}
	return errors.Join(r.Err(), cerr)
}
