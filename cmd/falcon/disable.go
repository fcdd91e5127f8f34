package main

import (
	"fmt"
	"os"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/netns"
)

func init() {
	app.Register(cli.Command{Name: "disable", Summary: "stop accelerating a host's overlay and restore every value changed", Run: runDisable})
}

func runDisable(args []string) error {
	fs := app.FlagSet("disable", "[--netns HOSTNS]")
	ns := fs.String("netns", "", "host network namespace (name under /run/netns or a path; default: the current one)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	o := agent.DefaultOptions()
	o.Netns = *ns
	o.Log = cliLogger(os.Stderr, "falcon disable: ", nil)
	was, err := agent.Disable(o)
	if err != nil {
		return err
	}
	if !was {
		fmt.Printf("falcon was not enabled in network namespace %s\n", netns.Label(*ns))
		return nil
	}
	fmt.Printf("falcon disabled in network namespace %s: programs detached, every changed value restored\n", netns.Label(*ns))
	return nil
}
