package datapath

import (
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestProgramCostFastPath reports what a hit costs each way, the median of
// single BPF_PROG_TEST_RUN runs (a hit rewrites its packet, so repeats
// would not hit again), once no packet has taken the slow path for a
// second (the steady state of a cached host). Logged, not judged: machines
// differ; the run's own clock reads are in it. Not named TestFast*: the
// kernel guests' run (make test-guest) would time an emulator.
func TestProgramCostFastPath(t *testing.T) {
	fl := fastFlow()
	inner := frame(fl, pktOpts{payload: 16})
	cases := []struct {
		name  string
		learn func(f *FastPath)
		prog  func(f *FastPath) *ebpf.Program
		pkt   []byte
	}{
		{"ingress hit", func(f *FastPath) { learnIngress(t, f, fl, inner) },
			func(f *FastPath) *ebpf.Program { return f.objs.FpathNicIn }, vxlanFrame(underlay4a, underlay4b, 4789, inner, pktOpts{})},
		{"egress hit", func(f *FastPath) {
			runFast(t, f.objs.FpathVethIn, inner)
			runFast(t, f.objs.FpathNicEg, vxlanFrame(underlay4b, underlay4a, 4789, inner, pktOpts{}))
		}, func(f *FastPath) *ebpf.Program { return f.objs.FpathVethIn }, inner},
	}
	for _, c := range cases {
		f := fastHarness(t)
		c.learn(f)
		time.Sleep(1100 * time.Millisecond) // past the guard's second
		var runs []time.Duration
		for range 20000 {
			ret, d, err := c.prog(f).Benchmark(slices.Clone(c.pkt), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ret != tcActRedirect {
				t.Fatalf("%s: returned %d, want a hit", c.name, ret)
			}
			runs = append(runs, d)
		}
		slices.Sort(runs)
		t.Logf("%s: min %v, p10 %v, median %v, p90 %v per packet", c.name, runs[0], runs[len(runs)/10], runs[len(runs)/2], runs[len(runs)*9/10])
	}
}
