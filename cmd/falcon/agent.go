package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/falconnet/falcon/internal/agent"
)

func init() {
	register(command{name: "agent", summary: "run falcon in the foreground until SIGTERM/SIGINT, then disable (systemd, Kubernetes)", run: runAgent})
}

func runAgent(args []string) error {
	fs := newFlagSet("agent", agentSynopsis)
	f := agent.AddFlags(fs)
	readyFD := fs.Int("ready-fd", -1, "internal: file descriptor on which to report readiness (used by falcon enable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ready := agent.OpenReadyPipe(*readyFD)
	defer ready.Close()
	o, err := agentOptions(f)
	if err != nil {
		ready.Report(err)
		return err
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("falcon agent[%d]: ", os.Getpid()))
	o.Logf = log.Printf
	// SIGHUP too: an agent started by hand dies with its terminal, and
	// should clean up when it does.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	return agent.RunReporting(ctx, o, ready)
}
