// Package roottest is the one gate of the tests that need root: they
// build namespaces, load BPF, start daemons and change sysfs, so they run
// only as root and never under -short. `go test -short ./...` (make unit)
// is the quick unit tests whoever runs it: run as root beside an
// integration run, a root test under -short would build testbeds and
// start dockerd outside the suite's lock and fight it over the machine's
// paths. A leaf (no package of the module), so that any package's tests
// can use it without an import cycle.
package roottest

import (
	"flag"
	"os"
	"testing"
)

// Root says whether the test runs as root: a fact for tests of what a
// user who is not root is told, not a gate.
func Root() bool { return os.Geteuid() == 0 }

// May says whether the root tests run: as root, without -short. Safe in
// TestMain before m.Run (it parses the flags go test passed).
func May() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return Root() && !testing.Short()
}

// Need skips t unless the root tests run (May).
func Need(t testing.TB) {
	t.Helper()
	switch {
	case !Root():
		t.Skip("needs root")
	case testing.Short():
		t.Skip("needs root, and -short runs the unit tests only")
	}
}
