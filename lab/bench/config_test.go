package bench

import (
	"context"
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

func TestDefaultCPUs(t *testing.T) {
	seq := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		return s
	}
	for _, c := range []struct {
		online           []int
		sender, receiver []int
	}{
		{[]int{3}, []int{3}, []int{3}},
		{seq(2), []int{0}, []int{1}},
		{seq(4), []int{0}, []int{1}},
		{seq(16), []int{0, 1, 2}, []int{3}},
	} {
		d := defaultCPUs(c.online)
		if !reflect.DeepEqual(d.sender, c.sender) || !reflect.DeepEqual(d.receiver, c.receiver) {
			t.Errorf("%d CPUs: sender %v receiver %v; want %v %v", len(c.online), d.sender, d.receiver, c.sender, c.receiver)
		}
	}
}

// resolve parses a command line the way falcon-lab bench does.
func resolve(t *testing.T, online []int, args ...string) (schema.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return schema.Config{}, err
	}
	return f.Resolve(online)
}

func TestResolveDefaults(t *testing.T) {
	c, err := resolve(t, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := schema.Config{Layouts: []string{"host", "docker"}, Modes: []string{"vanilla"}, Workloads: []string{"udp-stress", "tcp:128K"},
		Sizes: []int{16, 1400}, Duration: schema.Duration(10 * time.Second), Warmup: schema.Duration(500 * time.Millisecond), Runs: 5,
		Flows: []int{4}, Clients: 3, SenderCPUs: []int{0}, ReceiverCPUs: []int{1}, Rate: 10000, Sender: schema.SenderTools, Containers: 1, Baseline: "auto"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

// TestResolveLabelledModes: a mode may run twice under a label, the A/A
// control, with its settings.
func TestResolveLabelledModes(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--layouts", "docker", "--modes", "vanilla,vanilla@aa,falcon:threshold=90@b")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vanilla", "vanilla@aa", "falcon:threshold=90@b"}; !reflect.DeepEqual(c.Modes, want) {
		t.Fatalf("modes %q, want %q", c.Modes, want)
	}
	m, err := modes.Lookup("falcon:threshold=90@b")
	if err != nil {
		t.Fatal(err)
	}
	if pm, err := schema.ParseMode(m.Name()); err != nil || m.Name() != "falcon:threshold=90@b" || pm.Opts.Threshold != 90 || pm.Opts.Mode != agent.ModeFalcon {
		t.Errorf("labelled mode %s: %+v, %v", m.Name(), pm, err)
	}
	plan, _, err := Plan(c)
	if err != nil || len(plan) != 3 {
		t.Errorf("plan: %d testbeds, %v", len(plan), err)
	}
}

func TestResolvePresetYieldsToFlags(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--preset", "demo", "--runs", "2", "--sender-cpus", "1", "--receiver-cpus", "0")
	if err != nil {
		t.Fatal(err)
	}
	if c.Preset != "demo" || c.Runs != 2 || c.Duration != schema.Duration(2*time.Second) ||
		!reflect.DeepEqual(c.Layouts, []string{"host", "docker"}) || !reflect.DeepEqual(c.Modes, []string{"vanilla", "fastpath", "auto"}) ||
		!reflect.DeepEqual(c.SenderCPUs, []int{1}) || !reflect.DeepEqual(c.ReceiverCPUs, []int{0}) {
		t.Errorf("demo with --runs 2: %+v", c)
	}
	// Every preset resolves on 16 CPUs, and all but the scale ones (8)
	// on 2.
	for _, p := range PresetNames() {
		if _, err := resolve(t, seqCPUs(16), "--preset", p); err != nil {
			t.Errorf("preset %s does not resolve on 16 CPUs: %v", p, err)
		}
		if _, err := resolve(t, []int{0, 1}, "--preset", p); (err != nil) != strings.HasPrefix(p, "scale") {
			t.Errorf("preset %s on 2 CPUs: %v", p, err)
		}
	}
}

// TestResolveWeb: the web preset is FALCON Fig. 17's stand-in, its flows
// wrk's connections, one wrk per case; web runs over IPv6 too.
func TestResolveWeb(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--preset", "web")
	if err != nil {
		t.Fatal(err)
	}
	plan := mustPlan(t, c)
	var cases []string
	for _, tp := range plan {
		for _, cs := range tp.Cases {
			cases = append(cases, cs.String())
		}
	}
	want := "host/vanilla web 1 KiB ×200, host/vanilla web 64 KiB ×200, docker/vanilla web 1 KiB ×200, docker/vanilla web 64 KiB ×200, " +
		"docker/falcon web 1 KiB ×200, docker/falcon web 64 KiB ×200"
	if got := strings.Join(cases, ", "); got != want || plan[0].Containers != 1 {
		t.Errorf("cases %s\nwant %s", got, want)
	}
	if !strings.Contains(PresetHelp(), "FALCON Fig. 17") || !strings.Contains(workload.Help(), "CloudSuite") {
		t.Error("the help does not say what web stands for")
	}
	if _, err := resolve(t, []int{0, 1}, "--ipv6", "--workloads", "web:16K", "--flows", "200"); err != nil {
		t.Errorf("web over IPv6: %v", err)
	}
}

func TestResolveRejects(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--layouts", "kind"}, `unknown layout "kind"`},
		{[]string{"--modes", "vanilla,warp"}, `unknown mode "warp"`},
		{[]string{"--workloads", "udp-stress,ftp"}, `unknown workload "ftp"`},
		{[]string{"--workloads", ""}, "none given"},
		{[]string{"--sizes", "8"}, "out of range"},
		{[]string{"--sizes", "16,abc"}, "bad size"},
		{[]string{"--workloads", "udp", "--sizes", "64K"}, "does not fit a UDP datagram"},
		{[]string{"--workloads", "latency-tcp:128K"}, "does not fit"},
		{[]string{"--workloads", "tcp:2M"}, "out of range"},
		{[]string{"--sender-cpus", "2"}, "CPU 2 is not online"},
		{[]string{"--receiver-cpus", "0-x"}, "bad CPU"},
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--duration", "200ms"}, "--duration"},
		{[]string{"--warmup", "-1s"}, "--warmup"},
		{[]string{"--clients", "0"}, "--clients"},
		{[]string{"--rate", "10"}, "--rate"},
		{[]string{"--flows", "0"}, "--flows"},
		{[]string{"--workloads", "web:2M"}, "out of range"},
		{[]string{"--workloads", "web", "--sizes", "8"}, "out of range"},
		{[]string{"--workloads", "web", "--flows", "200,2000"}, "workload web: --flows 2000 is more than 1000"},
		{[]string{"--workloads", "memcached", "--flows", "200"}, "workload memcached: --flows 200 is more than 102"},
		{[]string{"--sender", "pktgen"}, `--sender "pktgen": want tools or kernel`},
		{[]string{"--sender", "kernel", "--workloads", "udp,tcp"}, "--sender kernel drives udp-stress, udp, multi-flow only, not tcp"},
		{[]string{"--sender", "kernel", "--workloads", "latency"}, "not latency"},
		{[]string{"--sender", "kernel", "--workloads", "udp", "--sizes", "16,1423"}, "1423 B does not fit one frame of the overlay (at most 1422 B)"},
		{[]string{"--ipv6", "--workloads", "tcp,udp-stress"}, "workload udp-stress runs sockperf, and Debian's sockperf (3.7) has no IPv6"},
		{[]string{"--ipv6", "--workloads", "latency"}, "no IPv6"},
		{[]string{"--ipv6", "--workloads", "memcached"}, "iperf3's workloads and web run"},
		{[]string{"--ipv6", "--sender", "kernel", "--workloads", "udp"}, "the kernel sender sends IPv4 frames only"},
		{[]string{"--ipv6", "--layouts", "docker-swarm", "--workloads", "tcp"}, "not built for layout docker-swarm"},
		{[]string{"--order-check", "--ipv6", "--workloads", "tcp"}, "--order-check numbers TCP segments by their IPv4 ID: not with --ipv6"},
		{[]string{"--order-check", "--workloads", "udp-stress,latency:16"}, "--order-check checks TCP workloads, and none of --workloads udp-stress,latency:16 is one"},
		{[]string{"--modes", "vanilla,vanilla@"}, "a label after @ is 1..16 of a-z and 0-9"},
		{[]string{"--modes", "vanilla@A-A"}, "a label after @"},
		{[]string{"--modes", "warp@aa"}, `unknown mode "warp"`},
		{[]string{"--modes", "mflow:batch=0"}, `mode mflow: batch=0: "0": want 1..`},
		{[]string{"--preset", "mflow7", "--modes", "vanilla,mflow:batch=16,elephant=fast"}, `mode mflow: elephant=fast: "fast": want a rate in bit/s`},
		{[]string{"--containers", "0"}, "--containers"},
		{[]string{"--preset", "fast"}, `unknown preset "fast"`},
		{[]string{"--baseline", "docker/turbo"}, "--baseline"},
		{[]string{"--layouts", "host", "--modes", "benchtest"}, "nothing to run"},
		{[]string{"--workloads", "rates", "--rates", "100M,fast"}, `--rates: bad rate "fast"`},
		{[]string{"--workloads", "rates", "--rates", "0"}, `--rates: bad rate "0"`},
		{[]string{"--workloads", "rates", "--rates", "-5M"}, "bad rate"},
		{[]string{"--workloads", "rates", "--rates", "1e9"}, "bad rate"},
		{[]string{"--workloads", "rates", "--rates", "1Gbps"}, "write bit rates as iperf3's -b takes them"},
		{[]string{"--workloads", "rates", "--rates", " , "}, "--rates: no rates given"},
		{[]string{"--workloads", "rates", "--rates", "200G"}, "out of range: 1K .. 100G bit/s"},
		{[]string{"--workloads", "rates", "--rates", "10pps"}, "out of range: 200 .. 100M packets/s"},
		{[]string{"--workloads", "rates:1400", "--rates", "1M"}, "workload rates: --rates 1M: 89 datagrams/s of 1400 B, too sparse to measure (at least 200/s)"},
		{[]string{"--workloads", "rates-tcp:64K", "--rates", "400Kpps"}, "TCP is held to bit rates"},
		{[]string{"--workloads", "rates-tcp", "--rates", "1M"}, "too sparse to measure (at least 2.4M)"},
		{[]string{"--workloads", "rates:64K"}, "does not fit a UDP datagram"},
		{[]string{"--workloads", "hotspot", "--flows", "1,4"}, "workload hotspot: --flows 1: a hotspot needs 2 flows or more"},
		{[]string{"--workloads", "hotspot", "--hotspot-rate", "lots"}, `--hotspot-rate: bad rate "lots"`},
		{[]string{"--workloads", "hotspot:1400", "--hotspot-rate", "1M"}, "workload hotspot: --hotspot-rate 1M: 89 datagrams/s"},
		{[]string{"--sender", "kernel", "--workloads", "hotspot"}, "not hotspot"},
		{[]string{"--workloads", "hotspot-tcp:128K", "--flows", "4,1"}, "workload hotspot-tcp: --flows 1: a hotspot needs 2 flows or more"},
		{[]string{"--workloads", "hotspot-tcp", "--hotspot-rate", "lots"}, `--hotspot-rate: bad rate "lots"`},
		{[]string{"--workloads", "hotspot-tcp", "--hotspot-rate", "100pps"}, "out of range: 200 .. 100M packets/s"},
		{[]string{"--workloads", "hotspot-tcp:128K", "--hotspot-rate", "1M"}, "workload hotspot-tcp: --hotspot-rate 1M: under 200 full TCP segments/s"},
		{[]string{"--workloads", "hotspot-tcp:128K", "--hotspot-rate", "10Mpps"}, `rate "115.84G" out of range: 1K .. 100G bit/s (10Mpps in full segments of 1448 B)`},
		{[]string{"--workloads", "hotspot-tcp:2M"}, `workload "hotspot-tcp:2M": size "2M" out of range`},
		{[]string{"--sender", "kernel", "--workloads", "hotspot-tcp"}, "not hotspot-tcp"},
		{[]string{"--ipv6", "--workloads", "overload-latency"}, "workload overload-latency runs sockperf, and Debian's sockperf (3.7) has no IPv6"},
		{[]string{"--workloads", "overload-latency-tcp:128K"}, "does not fit"},
		{[]string{"--workloads", "overload-latency", "--sizes", "8"}, "out of range"},
	} {
		_, err := resolve(t, []int{0, 1}, c.args...)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: got %v, want a ConfigError mentioning %q", c.args, err, c.msg)
		}
	}
}

// benchtestMode records what bench does with a mode.
type benchtestMode struct{ setups, undos int }

func (m *benchtestMode) Name() string { return "benchtest" }

func (m *benchtestMode) Setup(context.Context, *testbed.Testbed) (modes.SetUp, error) {
	m.setups++
	return modes.SetUp{Undo: func() error { m.undos++; return nil }}, nil
}

var testMode = &benchtestMode{}

func init() { modes.Register(testMode) }

func TestPlan(t *testing.T) {
	c, err := resolve(t, []int{0, 1}, "--layouts", "host,docker", "--modes", "vanilla,benchtest",
		"--workloads", "udp-stress,tcp:128K,multi-flow:16,udp-stress", "--sizes", "16,1400", "--flows", "1,4", "--baseline", "docker")
	if err != nil {
		t.Fatal(err)
	}
	if c.Baseline != "docker/vanilla" {
		t.Errorf("baseline %q, want docker/vanilla", c.Baseline)
	}
	plan, skipped, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "host × benchtest skipped") {
		t.Errorf("skipped %q, want host × benchtest", skipped)
	}
	var got []string
	for _, tp := range plan {
		for _, cs := range tp.Cases {
			got = append(got, cs.String())
		}
	}
	want := []string{
		"host/vanilla udp-stress 16 B", "host/vanilla udp-stress 1400 B", "host/vanilla tcp 128 KiB",
		"host/vanilla multi-flow 16 B", "host/vanilla multi-flow 16 B ×4",
		"docker/vanilla udp-stress 16 B", "docker/vanilla udp-stress 1400 B", "docker/vanilla tcp 128 KiB",
		"docker/vanilla multi-flow 16 B", "docker/vanilla multi-flow 16 B ×4",
		"docker/benchtest udp-stress 16 B", "docker/benchtest udp-stress 1400 B", "docker/benchtest tcp 128 KiB",
		"docker/benchtest multi-flow 16 B", "docker/benchtest multi-flow 16 B ×4",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan:\n got %q\nwant %q", got, want)
	}
	if n := CountRuns(plan, c); n != 15*5 {
		t.Errorf("CountRuns = %d, want 75", n)
	}
	if got := tools(c); !reflect.DeepEqual(got, []string{"iperf3", "sockperf"}) {
		t.Errorf("tools = %v", got)
	}
}
