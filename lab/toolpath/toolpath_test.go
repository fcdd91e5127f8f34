package toolpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookupPrefersBundle: a tool in the bundle's directory wins over PATH,
// one it does not carry comes from PATH by name, and a broken bundled copy
// is an error rather than a silent fallback to the host's.
func TestLookupPrefersBundle(t *testing.T) {
	bundle, host := t.TempDir(), t.TempDir()
	for _, f := range []struct {
		dir, name string
		mode      os.FileMode
	}{{bundle, "iperf3", 0o755}, {host, "iperf3", 0o755}, {host, "taskset", 0o755}, {bundle, "sockperf", 0o644}} {
		if err := os.WriteFile(filepath.Join(f.dir, f.name), []byte("#!/bin/sh\n"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", host)

	if got, err := lookupIn(bundle, "iperf3"); err != nil || got != filepath.Join(bundle, "iperf3") {
		t.Errorf("iperf3 = %q, %v; want the bundle's", got, err)
	}
	if got, err := lookupIn(bundle, "taskset"); err != nil || got != "taskset" {
		t.Errorf("taskset = %q, %v; want the plain name for PATH", got, err)
	}
	if got, err := lookupIn(bundle, "sockperf"); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Errorf("non-executable bundled sockperf = %q, %v; want an error", got, err)
	}
	if _, err := lookupIn(bundle, "ethtool"); err == nil {
		t.Error("ethtool found although neither bundle nor PATH has it")
	}
	if got, err := lookupIn("", "iperf3"); err != nil || got != "iperf3" {
		t.Errorf("no bundle: iperf3 = %q, %v; want PATH's", got, err)
	}
	if _, err := lookupIn(filepath.Join(bundle, "missing"), "iperf3"); err == nil || !strings.Contains(err.Error(), Env) {
		t.Errorf("missing bundle dir: %v; want an error naming %s", err, Env)
	}
	// A relative directory resolves to an absolute path: the tool is
	// started by wrappers (ip netns exec) that may change directory.
	t.Chdir(filepath.Dir(bundle))
	if got, err := lookupIn(filepath.Base(bundle), "iperf3"); err != nil || !filepath.IsAbs(got) {
		t.Errorf("relative bundle dir: %q, %v; want an absolute path", got, err)
	}
}
