package main

import (
	"bytes"
	"errors"
	"flag"
	"github.com/falconnet/falcon/lab/roottest"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/bench"
	"github.com/falconnet/falcon/lab/benchprobe"
	"github.com/falconnet/falcon/lab/schema"
)

// sandbox is a gVisor-like machine for the probe: an emulated 4.4.0
// kernel with network namespaces and veth but no VXLAN and no bpf().
type sandbox struct{ closed bool }

func (s *sandbox) Probe(id string) (string, error) {
	switch id {
	case benchprobe.FeatKernel:
		return "", errors.New("kernel 4.4.0 is older than 4.18; gVisor reports 4.4.0: this looks like an emulated kernel")
	case benchprobe.FeatVXLAN:
		return "", errors.New("RTNETLINK answers: Operation not supported")
	case benchprobe.FeatBPFSyscall:
		return "", errors.New("no bpf() syscall (ENOSYS)")
	}
	return "", nil
}
func (s *sandbox) Kernel() string   { return "4.4.0" }
func (s *sandbox) CPUs() int        { return 16 }
func (s *sandbox) ToolsDir() string { return "" }
func (s *sandbox) Close() error     { s.closed = true; return nil }

// TestProbeRefusal: what run.sh shows on a sandbox: the table on stdout,
// and an error (exit 1) that lists each missing feature of the quick
// preset and why.
func TestProbeRefusal(t *testing.T) {
	online, err := cpuset.Online()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := resolveBench(t, online, "--preset", "quick")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	probeOut = &out
	defer func() { probeOut = os.Stdout }()
	s := &sandbox{}
	err = runProbe(s, bench.ProbeNeeds(cfg))
	if cli.ExitCode(err) != 1 || !errors.Is(err, benchprobe.ErrBenchRefused) || !s.closed {
		t.Fatalf("probe on a sandbox: %v (exit %d, closed %v)", err, cli.ExitCode(err), s.closed)
	}
	want := "this machine cannot run the benchmark; missing:\n" +
		"  - a real Linux kernel, 4.18 or newer: kernel 4.4.0 is older than 4.18; gVisor reports 4.4.0: this looks like an emulated kernel\n" +
		"  - VXLAN devices: RTNETLINK answers: Operation not supported\n" +
		"  - the bpf() syscall: no bpf() syscall (ENOSYS)\n" +
		"  - loading falcon's tc programs (SCHED_CLS, bpf_set_hash, its maps): not tried, it needs the bpf() syscall\n" +
		"  - attaching tc programs (tcx, or clsact before Linux 6.6): not tried, it needs loading falcon's tc programs (SCHED_CLS, bpf_set_hash, its maps)"
	if err.Error() != want {
		t.Errorf("refusal:\n%s\nwant:\n%s", err, want)
	}
	// The quick preset uses no split and no --nic-cpu: XDP and threaded
	// NAPI are not its business, whatever the sandbox has.
	if strings.Contains(err.Error(), "XDP") || strings.Contains(err.Error(), "threaded") {
		t.Errorf("refusal names features the quick preset does not use:\n%s", err)
	}
	if !strings.Contains(out.String(), "5 feature(s) this run needs are missing") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestProbeNeeds: what each configuration asks of the machine.
func TestProbeNeeds(t *testing.T) {
	online := []int{0, 1}
	for _, c := range []struct {
		args                          []string
		vxlan, bridge, bpf, xdp, napi bool
		tools                         string
	}{
		{[]string{"--layouts", "host", "--workloads", "tcp"}, false, false, false, false, false, "ip,bridge,ethtool,taskset,iperf3"},
		{[]string{"--preset", "quick"}, true, true, true, false, false, "ip,bridge,ethtool,taskset,iperf3,sockperf"},
		{[]string{"--layouts", "calico", "--modes", "vanilla,rps", "--workloads", "latency"}, true, false, false, false, false, "ip,bridge,ethtool,taskset,sockperf"},
		{[]string{"--layouts", "docker", "--modes", "falcon+split", "--workloads", "udp-stress"}, true, true, true, true, false, "ip,bridge,ethtool,taskset,sockperf"},
	} {
		cfg, err := resolveBench(t, online, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		n := bench.ProbeNeeds(cfg)
		if n.VXLAN != c.vxlan || n.Bridge != c.bridge || n.BPF != c.bpf || n.XDP != c.xdp || n.ThreadedNAPI != c.napi ||
			strings.Join(n.Tools, ",") != c.tools {
			t.Errorf("%q: %+v", c.args, n)
		}
	}
	cfg, err := resolveBench(t, seq(8), "--preset", "scale")
	if err != nil {
		t.Fatal(err)
	}
	if n := bench.ProbeNeeds(cfg); !n.VXLAN || !n.Bridge || !n.BPF || !n.XDP || !n.ThreadedNAPI {
		t.Errorf("scale: %+v", n)
	}
}

// TestProbeTooFewCPUs: on a machine too small for the scale preset, the
// probe still probes and lists the CPUs among what is missing (exit 1),
// where a run says so as a usage error before touching anything.
func TestProbeTooFewCPUs(t *testing.T) {
	online, err := cpuset.Online()
	if err != nil || len(online) >= bench.ScaleMinCPUs {
		t.Skip("this machine has enough CPUs for the scale preset")
	}
	if err := runBench([]string{"--preset", "scale"}); cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "need at least 8 online CPUs") {
		t.Errorf("bench --preset scale on %d CPUs: %v", len(online), err)
	}
	if !roottest.May() {
		return // the probe itself needs root
	}
	var out bytes.Buffer
	probeOut = &out
	defer func() { probeOut = os.Stdout }()
	err = runBench([]string{"--probe", "--preset", "scale"})
	if cli.ExitCode(err) != 1 || !strings.Contains(err.Error(), "  - enough online CPUs: the scale presets need at least 8") {
		t.Errorf("bench --probe --preset scale on %d CPUs: %v", len(online), err)
	}
	if !strings.Contains(out.String(), "threaded NAPI") {
		t.Errorf("the probe did not probe the rest:\n%s", out.String())
	}
}

// resolveBench parses a bench command line as runBench does.
func resolveBench(t *testing.T, online []int, args ...string) (schema.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := bench.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return schema.Config{}, err
	}
	return f.Resolve(online)
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
