// Package toolpath decides which copy of an external tool falcon runs.
//
// The benchmark bundle (make bundle) carries its own iperf3, sockperf and
// ethtool, built for Debian, with the shared libraries they need. A machine
// the bundle is unpacked on may have other versions of those tools, or none;
// results must not depend on which. FALCON_TOOLS_DIR names the bundle's tool
// directory: a tool found there is always used, and PATH is searched only
// for tools the bundle does not carry (ip, taskset).
package toolpath

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Env is the environment variable naming the bundle's tool directory.
const Env = "FALCON_TOOLS_DIR"

// dir is read once: a bench must not switch tools half-way because
// something changed its environment.
var dir = sync.OnceValue(func() string { return os.Getenv(Env) })

// Dir returns the bundle's tool directory, "" when none is set.
func Dir() string { return dir() }

// Lookup returns what to run for tool name: the bundle's copy when
// FALCON_TOOLS_DIR has one, else name as found in PATH. The result is an
// absolute path for a bundled tool and the plain name otherwise, so that it
// can be handed on to a wrapper (ip netns exec, taskset) that searches PATH
// itself.
func Lookup(name string) (string, error) { return lookupIn(Dir(), name) }

func lookupIn(d, name string) (string, error) {
	if d != "" {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s=%s: not a directory", Env, d)
		}
		p := filepath.Join(d, name)
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		switch st, err := os.Stat(abs); {
		case err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0:
			return abs, nil
		case err == nil:
			// Falling back to PATH here would run a host tool although
			// the bundle meant to carry one.
			return "", fmt.Errorf("%s: bundled %s is not an executable file", abs, name)
		case !errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("bundled %s: %w", name, err)
		}
	}
	if _, err := exec.LookPath(name); err != nil {
		return "", err
	}
	return name, nil
}

// Bundled reports whether name is run from the bundle's tool directory.
func Bundled(name string) bool {
	d := Dir()
	if d == "" {
		return false
	}
	p, err := lookupIn(d, name)
	return err == nil && filepath.IsAbs(p)
}
