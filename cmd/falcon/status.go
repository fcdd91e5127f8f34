package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cli"
)

func init() {
	app.Register(cli.Command{Name: "status", Summary: "show whether falcon runs, its settings, CPU load and per-stage counters", Run: runStatus})
}

// statusOut is where the report goes; tests capture it.
var statusOut io.Writer = os.Stdout

// errNotReady makes status --ready exit 1 with a reason and nothing else;
// errNotAlive, status --alive.
var (
	errNotReady = errors.New("not ready")
	errNotAlive = errors.New("not alive")
)

func runStatus(args []string) error {
	fs := app.FlagSet("status", "[--netns HOSTNS] [--json] [--ready | --alive] [--explain]")
	ns := fs.String("netns", "", "host network namespace (name under /run/netns or a path; default: the current one)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	ready := fs.Bool("ready", false, "exit 0 only if an agent runs, is attached and has fresh load data (a readiness probe)")
	alive := fs.Bool("alive", false, "exit 0 unless the agent is wedged: its process is gone or its load sampler stopped (a liveness probe)")
	explain := fs.Bool("explain", false, "also say why falcon is on or off the path: the adaptive policy's latest decision by cause, its inputs and verdict, and the latest that acted")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	o := agent.DefaultOptions()
	o.Netns = *ns
	r, err := agent.Status(o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(statusOut)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if !*ready && !*alive {
		r.WriteText(statusOut)
		if *explain {
			r.WriteExplain(statusOut)
		}
	}
	if *alive {
		if why := r.WhyNotAlive(); why != "" {
			return fmt.Errorf("%w: %s", errNotAlive, why)
		}
		if !*asJSON && !*ready {
			fmt.Fprintln(statusOut, "alive")
		}
	}
	if !*ready {
		return nil
	}
	if !r.Ready {
		return fmt.Errorf("%w: %s", errNotReady, r.WhyNotReady())
	}
	if !*asJSON {
		r.WriteReady(statusOut)
	}
	return nil
}
