package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/metrics"
)

func init() {
	app.Register(cli.Command{Name: "agent", Summary: "run falcon in the foreground until SIGTERM/SIGINT, then disable (systemd, Kubernetes)", Run: runAgent})
}

func runAgent(args []string) error {
	// A log reader that died (a closed terminal, a pipe to a pager that
	// quit) makes a write to stderr fail with EPIPE: Go's default is to
	// die of SIGPIPE then, with nothing restored. The agent logs on
	// without a reader instead, and cleans up when it is stopped.
	signal.Ignore(syscall.SIGPIPE)
	fs := app.FlagSet("agent", agentSynopsis)
	f := agent.AddAgentFlags(fs)
	readyFD := fs.Int("ready-fd", -1, "internal: file descriptor on which to report readiness (used by falcon enable)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	ready := agent.OpenReadyPipe(*readyFD)
	defer ready.Close()
	o, err := agentOptions(f)
	if err != nil {
		ready.Report(err)
		return err
	}
	o.Log = agent.NewLogger(agent.LogWriter(o), o.LogFormat).With("pid", os.Getpid())
	var started func(*agent.Agent)
	if o.MetricsAddr != "" {
		// Bound now, served below: a port in use stops the agent before
		// it has changed anything.
		l, err := agent.ListenMetrics(o.MetricsAddr)
		if err != nil {
			ready.Report(err)
			return err
		}
		srv := metrics.NewServer(l, metrics.New(o, version), o.Log)
		defer srv.Close()
		go func() {
			if err := srv.Serve(); err != nil {
				o.Log.Error("metrics server stopped", "err", err)
			}
		}()
		o.Log.Info("serving metrics", "addr", srv.Addr().String(), "path", "/metrics")
		started = srv.Attach
	}
	// SIGHUP too: an agent started by hand dies with its terminal, and
	// should clean up when it does.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	return agent.RunReporting(ctx, o, ready, started)
}
