package main

import (
	"os"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/top"
)

func init() {
	app.Register(cli.Command{Name: "top", Summary: "live view of one host: per-CPU load, the stages each CPU runs, flows steered, fallbacks", Run: runTop})
}

func runTop(args []string) error {
	fs := app.FlagSet("top", "[--netns HOSTNS] [--once] [--interval DUR] [--width N]")
	ns := fs.String("netns", "", "host network namespace (name under /run/netns or a path; default: the current one)")
	once := fs.Bool("once", false, "print one plain-text frame (rates over one interval) and exit, for scripts")
	interval := fs.Duration("interval", time.Second, "time between frames")
	width := fs.Int("width", 100, "--once: columns of the frame")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *interval < 100*time.Millisecond || *interval > time.Hour {
		return cli.Usagef("--interval %v: want 100ms..1h", *interval)
	}
	if *width < 40 {
		return cli.Usagef("--width %d: want at least 40", *width)
	}
	o := top.Options{Agent: agent.DefaultOptions(), Interval: *interval}
	o.Agent.Netns = *ns
	if *once {
		return top.Once(os.Stdout, o, *width)
	}
	return top.Run(o)
}
