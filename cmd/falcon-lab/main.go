// Command falcon-lab is falcon's lab: it builds testbeds of namespaces,
// benches layouts × modes × workloads on them, traces where each stage of
// a flow runs, reports and simulates. Researchers run it; a node needs
// only falcon (cmd/falcon), which imports nothing of the lab.
package main

import (
	"os"

	"github.com/falconnet/falcon/internal/cli"
)

// version is set at link time by the Makefile (-X main.version); results
// files record it.
var version = "dev"

var app = cli.New("falcon-lab", &version, cli.Elsewhere("falcon", cli.NodeCommands))

func main() { os.Exit(app.Main(os.Args[1:], os.Stderr)) }
