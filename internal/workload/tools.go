package workload

import (
	"errors"
	"fmt"
	"os/exec"
)

// packages names the Debian package that provides each tool.
var packages = map[string]string{
	"iperf3":   "iperf3",
	"sockperf": "sockperf",
	"ip":       "iproute2",
	"taskset":  "util-linux",
	"ethtool":  "ethtool",
	"bpftool":  "bpftool",
}

// CheckTools returns one error naming every tool not found in PATH, with
// the command that installs it.
func CheckTools(names ...string) error {
	var errs []error
	for _, n := range names {
		if _, err := exec.LookPath(n); err == nil {
			continue
		}
		pkg := packages[n]
		if pkg == "" {
			pkg = n
		}
		errs = append(errs, fmt.Errorf("%s not found: apt-get install %s", n, pkg))
	}
	return errors.Join(errs...)
}
