package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/testbed"
)

func init() {
	app.Register(cli.Command{Name: "testbed", Summary: "build or remove a two-host overlay testbed of namespaces", Run: runTestbed})
}

const testbedSynopsis = `up --layout L --name N [--containers K] [--netpol] [--json] | down --name N | down --all | list [--json]`

// testbedOut is where the testbed command prints; tests replace it.
var testbedOut io.Writer = os.Stdout

func runTestbed(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(os.Stderr, "usage: falcon-lab testbed %s\n\nlayouts: %s\n", testbedSynopsis, strings.Join(testbed.Layouts, ", "))
		if len(args) == 0 {
			return cli.Usagef("missing subcommand (up, down or list)")
		}
		return nil
	}
	switch args[0] {
	case "up":
		return testbedUp(args[1:])
	case "down":
		return testbedDown(args[1:])
	case "list":
		return testbedList(args[1:])
	}
	return cli.Usagef("unknown subcommand %q (up, down or list)", args[0])
}

func testbedUp(args []string) error {
	fs := app.FlagSet("testbed up", "--layout L --name N [--containers K] [--ipv6] [--netpol] [--json]")
	layout := fs.String("layout", "", "layout: "+strings.Join(testbed.Layouts, ", "))
	name := fs.String("name", "", "testbed name: lower-case letters, digits, dashes")
	k := fs.Int("containers", 1, "containers per host (docker, flannel, calico)")
	v6 := fs.Bool("ipv6", false, "IPv6: wire, overlay and containers (not docker-swarm or k8s; flannel-daemon runs Flannel dual stack)")
	netpol := fs.Bool("netpol", false, "k8s: enforce NetworkPolicies with kube-network-policies on each node (scripts/k8s/netpol.sh builds it)")
	asJSON := fs.Bool("json", false, "print the testbed as JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" || *layout == "" {
		return cli.Usagef("--name and --layout are required")
	}
	if *k < 1 {
		return cli.Usagef("--containers must be at least 1, not %d", *k)
	}
	s := testbed.Spec{Name: *name, Layout: *layout, Containers: *k, IPv6: *v6, NetworkPolicy: *netpol}
	if err := testbed.Validate(s); err != nil {
		return cli.Usagef("%s", err)
	}
	// Ctrl-C cancels Up, which then removes what it made.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := testbed.Up(ctx, s)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(t)
	}
	t.WriteText(testbedOut)
	return nil
}

func testbedDown(args []string) error {
	fs := app.FlagSet("testbed down", "--name N | --all")
	name := fs.String("name", "", "testbed to remove")
	all := fs.Bool("all", false, "remove every testbed")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if (*name == "") == !*all {
		return cli.Usagef("give either --name N or --all")
	}
	if *name != "" {
		if err := testbed.ValidateName(*name); err != nil {
			return cli.Usagef("%s", err)
		}
	}
	list, err := testbed.List()
	if err != nil {
		return err
	}
	found := false
	for _, t := range list {
		if *all || t.Name == *name {
			found = true
			for _, p := range t.Problems {
				fmt.Fprintf(os.Stderr, "falcon-lab testbed: note: %s: %s\n", t.Name, p)
			}
		}
	}
	if *all {
		if err := testbed.DownAll(); err != nil {
			return err
		}
		fmt.Fprintf(testbedOut, "removed %d testbed(s)\n", len(list))
		return nil
	}
	if !found {
		return fmt.Errorf("no testbed named %q (see 'falcon-lab testbed list')", *name)
	}
	if err := testbed.Down(*name); err != nil {
		return err
	}
	fmt.Fprintf(testbedOut, "removed testbed %s\n", *name)
	return nil
}

func testbedList(args []string) error {
	fs := app.FlagSet("testbed list", "[--json]")
	asJSON := fs.Bool("json", false, "print the testbeds as JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	list, err := testbed.List()
	if err != nil {
		return err
	}
	if *asJSON {
		if list == nil {
			list = []testbed.Testbed{}
		}
		return printJSON(list)
	}
	testbed.WriteList(testbedOut, list)
	return nil
}

func printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(testbedOut, "%s\n", b)
	return err
}
