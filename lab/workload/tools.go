package workload

import (
	"errors"
	"fmt"
	"os/exec"

	"github.com/falconnet/falcon/lab/toolpath"
)

// packages names the Debian package that provides each tool.
var packages = map[string]string{
	"iperf3":    "iperf3",
	"sockperf":  "sockperf",
	"ip":        "iproute2",
	"taskset":   "util-linux",
	"ethtool":   "ethtool",
	"bpftool":   "bpftool",
	"memcached": "memcached",
	"memcaslap": "libmemcached-tools",
	"nginx":     "nginx",
	"wrk":       "wrk",
}

// CheckTools returns one error naming every tool that cannot be run: not
// in the bundle's tool directory (toolpath.Env) nor in PATH, with the
// command that installs it, or broken in the bundle.
func CheckTools(names ...string) error {
	var errs []error
	for _, n := range names {
		_, err := toolpath.Lookup(n)
		switch {
		case err == nil:
			continue
		case toolpath.Dir() != "" && !errors.Is(err, exec.ErrNotFound):
			errs = append(errs, err)
			continue
		}
		errs = append(errs, fmt.Errorf("%s not found: apt-get install %s", n, Package(n)))
	}
	return errors.Join(errs...)
}

// Package is the Debian package that provides tool.
func Package(tool string) string {
	if p := packages[tool]; p != "" {
		return p
	}
	return tool
}

// toolArg is what argv names tool by: the bundle's copy when there is one
// (toolpath.Lookup), else the plain name for PATH. CheckTools ran first, so
// an error here has been reported already.
func toolArg(tool string) string {
	if p, err := toolpath.Lookup(tool); err == nil {
		return p
	}
	return tool
}
