package testbed

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// SlowdownEnv names how many times slower than a 2-vCPU machine this one
// runs the daemons; every wait for a daemon or the cluster is that many
// times longer. An emulated kernel guest (scripts/kernels/guest.sh under
// TCG) sets it: there kube-apiserver, kubelet and flanneld each take
// minutes to start, and flanneld leased its subnet past the 30 s a
// machine gives it.
const SlowdownEnv = "FALCON_TESTBED_SLOWDOWN"

// slowdown returns SlowdownEnv's factor, 1 where it is unset.
func slowdown() (int, error) {
	v := os.Getenv(SlowdownEnv)
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("%s=%q: want a whole factor from 1 to 100", SlowdownEnv, v)
	}
	return n, nil
}

// slowed is d on this machine: d times the slowdown (checked by Up).
func slowed(d time.Duration) time.Duration {
	n, err := slowdown()
	if err != nil {
		return d
	}
	return d * time.Duration(n)
}
