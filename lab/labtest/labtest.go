// Package labtest is what the root integration tests share: the checks
// that skip a test this machine cannot run, testbeds that are removed
// when the test ends, also when it fails, and the binaries built to run.
package labtest

import (
	"context"
	"github.com/falconnet/falcon/lab/roottest"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/testbed"
)

// NeedRoot skips t unless it runs as root (namespaces, BPF, sysfs).
func NeedRoot(t testing.TB) {
	t.Helper()
	roottest.Need(t)
}

// NeedTestbeds skips t unless it runs as root on a machine that can build
// testbeds (testbed.CheckSystem: ip, ethtool, …).
func NeedTestbeds(t testing.TB) {
	t.Helper()
	NeedRoot(t)
	if err := testbed.CheckSystem(); err != nil {
		t.Skip(err)
	}
}

// Testbed builds the testbed of spec, removed when the test ends, also on
// failure: a testbed that cannot be removed fails the test. A layout this
// machine cannot build (its daemons are not built, …) skips it; a layout
// ending in "-ipv6" is that layout over IPv6 only.
func Testbed(t testing.TB, spec testbed.Spec) *testbed.Testbed {
	t.Helper()
	if l, v6 := strings.CutSuffix(spec.Layout, "-ipv6"); v6 {
		spec.Layout, spec.IPv6 = l, true
	}
	if err := testbed.CheckLayout(spec.Layout); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() {
		if err := testbed.Down(spec.Name); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	tb, err := testbed.Up(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}
