package agent

import (
	"os"
	"runtime"
	"testing"
)

// generatorPs: the goroutines that send and receive a test's traffic in
// this process (a sender and a receiver for each of a testbed's two
// container pairs), each busy for as long as it runs.
const generatorPs = 4

// TestMain gives the load generators Ps of their own. An agent has its
// process to itself in use; here it shares one with them, and its
// real-time sampler, back from each sleep, needs a P to run on: with the
// generators holding every P on threads that saturating softirqs starve,
// it waited for them (loadavg.Sampler.RealTime), its samples came up to
// 2 s late, and steering fell back on stale load because of the test.
func TestMain(m *testing.M) {
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + generatorPs)
	os.Exit(m.Run())
}
