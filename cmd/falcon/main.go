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

var app = cli.New("falcon", &version, labCommands())

// labCommands points each of falcon-lab's commands there, so that
// 'falcon bench' says where bench went rather than "unknown command".
func labCommands() map[string]string {
	m := map[string]string{}
	for _, c := range cli.LabCommands {
		m[c] = "falcon-lab"
	}
	return m
}

func main() { os.Exit(app.Main(os.Args[1:], os.Stderr)) }
