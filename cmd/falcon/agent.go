package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/falconnet/falcon/internal/agent"
)

func init() {
	register(command{name: "agent", summary: "run falcon in the foreground until SIGTERM/SIGINT, then disable (systemd, Kubernetes)", run: runAgent})
}

func runAgent(args []string) error {
	fs := newFlagSet("agent", agentSynopsis)
	f := addAgentFlags(fs)
	readyFD := fs.Int("ready-fd", -1, "internal: file descriptor on which to report readiness (used by falcon enable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var ready *os.File
	if *readyFD >= 0 {
		ready = os.NewFile(uintptr(*readyFD), "ready")
		defer ready.Close()
	}
	report := func(msg string) {
		if ready != nil {
			fmt.Fprintln(ready, msg)
			ready.Close()
			ready = nil
		}
	}
	o, err := f.options()
	if err != nil {
		report("error: " + oneLine(err))
		return err
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("falcon agent[%d]: ", os.Getpid()))
	o.Logf = log.Printf
	// SIGHUP too: an agent started by hand dies with its terminal, and
	// should clean up when it does.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	err = agent.Run(ctx, o, func() {
		log.Printf("ready")
		report("ready")
	})
	if err != nil {
		report("error: " + oneLine(err))
		log.Printf("%v", err)
	}
	return err
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
