// Command falcon pipelines the softirqs of container overlay traffic over
// several CPUs on unmodified kernels: the node product, what the
// DaemonSet's image and the systemd unit run. The lab's benches, testbeds
// and traces are falcon-lab's (cmd/falcon-lab).
package main

import (
	"os"

	"github.com/falconnet/falcon/internal/cli"
)

// version is set at link time by the Makefile (-X main.version).
var version = "dev"

// falcon bench says that bench is falcon-lab's rather than "unknown
// command".
var app = cli.New("falcon", &version, cli.Elsewhere("falcon-lab", cli.LabCommands))

func main() { os.Exit(app.Main(os.Args[1:], os.Stderr)) }
