package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/seqcheck"
)

// TestMetricsAndTopUnderTraffic enables falcon on a testbed with
// --metrics-addr and sequenced UDP traffic through the overlay, then
// scrapes the agent and parses the text with the Prometheus client's own
// parser: every counter must be what the BPF maps hold, the VXLAN hook must
// have seen what the receiver got, and the agent's own metrics must move.
// falcon top is watched on the same agent, with --once and in tmux.
func TestMetricsAndTopUnderTraffic(t *testing.T) {
	bin, tb := cliTestbed(t, "m")
	h1, h2 := tb.Hosts[0].Netns, tb.Hosts[1].Netns
	addr := freeAddr(t)
	// policy paper: steering does not wait for the engagement test, so
	// packets are steered from the start; always on, so that no load of
	// the machine's keeps every choice inline (at the default threshold,
	// CI's busier CPUs could; at 100, two saturated ones); at threshold
	// 100 every CPU has room for the first choice unless saturated.
	// Mode falcon: the default's fast path would carry the datagrams past
	// the VXLAN hook whose counts this test compares.
	out, code := falcon(t, bin, "enable", "--netns", h2, "--mode", "falcon", "--policy", "paper", "--threshold", "100", "--always-on",
		"--metrics-addr", addr, "--log-format", "json")
	if code != 0 {
		t.Fatalf("enable: exit %d\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := falcon(t, bin, "disable", "--netns", h2); code != 0 {
			t.Errorf("disable: exit %d\n%s", code, out)
		}
	})
	pins := pinDirOf(t, h2)
	clients, servers := tb.Endpoints()
	if out, err := exec.Command("ip", "netns", "exec", clients[0].Netns, "ping", "-c", "1", "-W", "5", servers[0].Addr).CombinedOutput(); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dst := netip.MustParseAddr(servers[0].Addr)
	// Paced, so that the sender never starves the agent of CPU.
	paced := seqcheck.SendOptions{Netns: clients[0].Netns, Dst: dst, Flows: 16, Size: 200, CPU: 0,
		Pause: time.Millisecond, PauseEvery: 3}

	mTop := topUnderTraffic(t, ctx, bin, h2, addr, servers[0].Netns, paced)
	// The counts below start after the last of that traffic: the receiver
	// waited for the flows to be idle.
	m0 := scrape(t, addr)
	if sum(m0, "falcon_stage_packets_total", "overlay") <= sum(mTop, "falcon_stage_packets_total", "overlay") {
		t.Error("the VXLAN hook's packets did not grow under traffic")
	}

	received, total := sendCounted(t, ctx, servers[0].Netns, paced)
	before, err := datapath.ReadCounters(pins)
	if err != nil {
		t.Fatal(err)
	}
	m1 := scrape(t, addr)
	after, err := datapath.ReadCounters(pins)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d datagrams, %d received", total, received)
	sameAsBPF(t, m1, before, after)

	// The VXLAN hook saw every datagram that arrived, and no more than were
	// sent (a few stray packets, such as neighbour discovery, allowed).
	seen := sum(m1, "falcon_stage_packets_total", "overlay") - sum(m0, "falcon_stage_packets_total", "overlay")
	if seen < float64(received) || seen > float64(total)+16 {
		t.Errorf("the VXLAN hook saw %.0f packets; %d datagrams arrived of %d sent", seen, received, total)
	}
	checkHookOutcomes(t, m1)
	checkSteeredAcross(t, m1)
	checkAgentMetrics(t, m0, m1)
	jsonLog(t, h2)

	if out, code := falcon(t, bin, "top", "--netns", h1, "--once"); code != 1 || !strings.Contains(out, "falcon is not enabled in network namespace "+h1) {
		t.Errorf("top where no agent runs: exit %d\n%s", code, out)
	}
}

// topUnderTraffic watches falcon top on ns under traffic to srvNetns and
// returns the metrics from before that traffic. The traffic runs until top
// has been watched: a fixed count lasted 4 s here, less than top's two
// terminal sessions, and over 2 minutes in the 6.1 guest under TCG.
func topUnderTraffic(t *testing.T, ctx context.Context, bin, ns, addr, srvNetns string, paced seqcheck.SendOptions) map[string]*dto.MetricFamily {
	mTop := scrape(t, addr)
	drain, err := seqcheck.Listen(srvNetns, paced.Dst, 7401)
	if err != nil {
		t.Fatal(err)
	}
	defer drain.Close()
	drained := make(chan error, 1)
	go func() {
		_, err := drain.Wait(ctx, 0) // ends once the flows stopped
		drained <- err
	}()
	topCtx, stopTop := context.WithCancel(ctx)
	topTraffic := paced
	topTraffic.Port, topTraffic.PktsPerFlow = 7401, 1<<26
	topSent := make(chan error, 1)
	go func() { topSent <- seqcheck.Send(topCtx, topTraffic) }()
	time.Sleep(1500 * time.Millisecond)
	t.Run("top --once", func(t *testing.T) { topOnce(t, bin, ns) })
	t.Run("top in tmux", func(t *testing.T) { topInTmux(t, bin, ns) })
	stopTop()
	if err := <-topSent; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	return mTop
}

// sendCounted sends 4000 datagrams a flow to srvNetns and returns how many
// arrived of how many sent.
func sendCounted(t *testing.T, ctx context.Context, srvNetns string, paced seqcheck.SendOptions) (received, total uint64) {
	r, err := seqcheck.Listen(srvNetns, paced.Dst, 7400)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type result struct {
		got map[netip.AddrPort]seqcheck.Stats
		err error
	}
	// Read while the sender sends: a receiver that waits for the end
	// overflows its socket and makes the counts below about the buffer.
	recv := make(chan result, 1)
	go func() {
		got, err := r.Wait(ctx, 0)
		recv <- result{got, err}
	}()
	sent := make(chan error, 1)
	go func() {
		counted := paced
		counted.Port, counted.PktsPerFlow = 7400, 4000
		sent <- seqcheck.Send(ctx, counted)
	}()

	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	res := <-recv
	if res.err != nil {
		t.Fatal(res.err)
	}
	got := res.got
	for _, s := range got {
		received, total = received+s.Received, total+s.Total
	}
	return received, total
}

// checkHookOutcomes: each packet a hook sees takes one outcome, and each
// it decides on is counted once more by the CPU of its next stage.
func checkHookOutcomes(t *testing.T, m1 map[string]*dto.MetricFamily) {
	for _, role := range []string{"nic", "overlay"} {
		decidedOn := func(cpu string) float64 {
			return sumOn(m1, "falcon_decisions_total", role, cpu) + sumOn(m1, "falcon_kept_decisions_total", role, cpu) +
				sumOn(m1, "falcon_guard_holds_total", role, cpu)
		}
		decided := decidedOn("")
		if ran, passed := sum(m1, "falcon_stage_packets_total", role), sum(m1, "falcon_passed_packets_total", role); ran != decided+passed {
			t.Errorf("%s hook: %.0f packets seen, %.0f decided and %.0f passed", role, ran, decided, passed)
		}
		if next := sum(m1, "falcon_steered_packets_total", role); next != decided {
			t.Errorf("%s hook: %.0f packets by next stage's CPU, %.0f decided", role, next, decided)
		}
		// A hook decides on the CPU it runs on: no CPU has more decisions
		// than packets the hook saw there (the rest were passed, which are
		// counted per hook only).
		cpus := map[string]bool{}
		for _, m := range m1["falcon_decisions_total"].GetMetric() {
			if label(m, "role") == role {
				cpus[label(m, "cpu")] = true
			}
		}
		for cpu := range cpus {
			if d, ran := decidedOn(cpu), sumOn(m1, "falcon_stage_packets_total", role, cpu); d > ran {
				t.Errorf("%s hook: %.0f decisions on CPU %s, which ran %.0f of its packets", role, d, cpu, ran)
			}
		}
		if len(cpus) == 0 {
			t.Errorf("%s hook: no decisions by CPU", role)
		}
	}
}

// checkSteeredAcross: with policy paper always on, the hooks send some flows'
// next stage to a CPU they did not run on. Counted per CPU as packets
// sent there beyond those the hook ran there: a lower bound, since
// flows crossing both ways cancel (the VXLAN hook's count alone was 0
// in CI with its stages spread over both CPUs); the NIC hook runs on
// the sender's CPU only, so nothing cancels there, and each of the 16
// flows goes to the other CPU by its hashes about every other time.
func checkSteeredAcross(t *testing.T, m1 map[string]*dto.MetricFamily) {
	var cross float64
	for _, role := range []string{"nic", "overlay"} {
		for _, m := range m1["falcon_steered_packets_total"].GetMetric() {
			if label(m, "role") != role {
				continue
			}
			cpu := label(m, "cpu")
			for _, r := range m1["falcon_stage_packets_total"].GetMetric() {
				if label(r, "role") == role && label(r, "cpu") == cpu {
					cross += max(0, val(m)-val(r))
				}
			}
			if !hasCPU(m1, role, cpu) {
				cross += val(m)
			}
		}
	}
	if cross == 0 {
		decisions := map[string]float64{}
		for _, m := range m1["falcon_decisions_total"].GetMetric() {
			decisions[label(m, "role")+" "+label(m, "decision")] += val(m)
		}
		t.Errorf("no stage ran on another CPU than its hook: nothing was steered (decisions %v)", decisions)
	}
}

// checkAgentMetrics checks the agent's own metrics from m0 to m1.
func checkAgentMetrics(t *testing.T, m0, m1 map[string]*dto.MetricFamily) {
	for name, want := range map[string]float64{"falcon_enabled": 1, "falcon_ready": 1, "falcon_steering": 1, "falcon_agent_containers": 1, "falcon_load_stale": 0} {
		if v := sum(m1, name, ""); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if s0, s1 := sum(m0, "falcon_agent_load_samples_total", ""), sum(m1, "falcon_agent_load_samples_total", ""); s1 <= s0 {
		t.Errorf("load samples did not grow: %v then %v", s0, s1)
	}
	// The paper policy never stands down: on the path, steering, all along.
	on0, on1 := sum(m0, "falcon_agent_on_path_seconds_total", ""), sum(m1, "falcon_agent_on_path_seconds_total", "")
	if eng := sum(m1, "falcon_agent_engaged_seconds_total", ""); on1 <= on0 || eng < on1*0.99 || sum(m1, "falcon_agent_stand_downs_total", "") != 0 {
		t.Errorf("time on the path %v then %v, engaged %v, stand-downs %v", on0, on1, eng, sum(m1, "falcon_agent_stand_downs_total", ""))
	}
	if sum(m1, "falcon_build_info", "") != 1 || m1["go_goroutines"] == nil {
		t.Error("build_info or the Go runtime's metrics are missing")
	}
}

// hasCPU: the hooks of role ran packets on cpu.
func hasCPU(fams map[string]*dto.MetricFamily, role, cpu string) bool {
	for _, m := range fams["falcon_stage_packets_total"].GetMetric() {
		if label(m, "role") == role && label(m, "cpu") == cpu {
			return true
		}
	}
	return false
}

// freeAddr is a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v\n%s", resp.StatusCode, err, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, body)
	}
	return fams
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func val(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// sum adds a family's samples, of the hooks of role when role is given.
func sum(fams map[string]*dto.MetricFamily, name, role string) float64 {
	return sumOn(fams, name, role, "")
}

// sumOn is sum, of the samples of one cpu when cpu is given.
func sumOn(fams map[string]*dto.MetricFamily, name, role, cpu string) float64 {
	var v float64
	for _, m := range fams[name].GetMetric() {
		if (role == "" || label(m, "role") == role) && (cpu == "" || label(m, "cpu") == cpu) {
			v += val(m)
		}
	}
	return v
}

// sameAsBPF checks each per-hook, per-CPU counter scraped against the BPF
// maps read just before and just after the scrape, and the decision and
// guard counters summed over cpu against the hook's totals.
func sameAsBPF(t *testing.T, fams map[string]*dto.MetricFamily, before, after datapath.Counters) {
	t.Helper()
	find := func(c datapath.Counters, hook, role string) *datapath.Stage {
		for i := range c.Stages {
			if s := &c.Stages[i]; s.Hook.Name == hook && string(s.Hook.Role) == role {
				return s
			}
		}
		return nil
	}
	cpuOf := func(m *dto.Metric) int {
		var c int
		fmt.Sscan(label(m, "cpu"), &c)
		return c
	}
	within := func(what string, v float64, b, a uint64) {
		if v < float64(b) || v > float64(a) {
			t.Errorf("%s = %.0f; the BPF maps held %d, then %d", what, v, b, a)
		}
	}
	decided := map[string]func(d datapath.Decided, m *dto.Metric) uint64{
		"falcon_decisions_total": func(d datapath.Decided, m *dto.Metric) uint64 {
			return map[string]uint64{"first": d.First, "second": d.Second, "fallback": d.Fallback}[label(m, "decision")]
		},
		"falcon_fallbacks_total": func(d datapath.Decided, m *dto.Metric) uint64 {
			return map[string]uint64{"load": d.Fallback - d.FallbackStale - d.FallbackIdle, "stale": d.FallbackStale,
				"not_paying": d.FallbackIdle}[label(m, "reason")]
		},
		"falcon_kept_decisions_total": func(d datapath.Decided, _ *dto.Metric) uint64 { return d.FlowletHits },
		"falcon_guard_holds_total":    func(d datapath.Decided, _ *dto.Metric) uint64 { return d.Holds },
		"falcon_guard_moves_total":    func(d datapath.Decided, _ *dto.Metric) uint64 { return d.Moved },
		"falcon_guard_timeouts_total": func(d datapath.Decided, _ *dto.Metric) uint64 { return d.Timeouts },
	}
	checks := map[string]func(s *datapath.Stage, m *dto.Metric) uint64{
		"falcon_stage_packets_total":   func(s *datapath.Stage, m *dto.Metric) uint64 { return s.RanOn[cpuOf(m)] },
		"falcon_steered_packets_total": func(s *datapath.Stage, m *dto.Metric) uint64 { return s.SteeredTo[cpuOf(m)] },
	}
	for name, get := range decided {
		checks[name] = func(s *datapath.Stage, m *dto.Metric) uint64 { return get(s.PerCPU[cpuOf(m)], m) }
	}
	n := 0
	for name, get := range checks {
		f := fams[name]
		if f == nil {
			t.Errorf("no %s in the scrape", name)
			continue
		}
		for _, m := range f.Metric {
			hook, role := label(m, "hook"), label(m, "role")
			if b, a := find(before, hook, role), find(after, hook, role); b == nil || a == nil {
				t.Errorf("%s: hook %s (%s) is not in the BPF maps", name, hook, role)
			} else {
				within(name+labels(m), val(m), get(b, m), get(a, m))
				n++
			}
		}
	}
	// Summed over cpu, what the hook decided: falcon status's numbers.
	sums := 0
	for name, get := range decided {
		type key struct{ hook, role, kind string }
		sum, sample := map[key]float64{}, map[key]*dto.Metric{}
		for _, m := range fams[name].GetMetric() {
			k := key{label(m, "hook"), label(m, "role"), label(m, "decision") + label(m, "reason")}
			sum[k] += val(m)
			sample[k] = m
		}
		for k, v := range sum {
			b, a := find(before, k.hook, k.role), find(after, k.hook, k.role)
			if b == nil || a == nil {
				continue // reported above
			}
			within(fmt.Sprintf("%s{hook=%s,role=%s,%s} summed over cpu", name, k.hook, k.role, k.kind), v,
				get(b.Decided, sample[k]), get(a.Decided, sample[k]))
			sums++
		}
	}
	t.Logf("%d scraped counters and %d sums over cpu compared with the BPF maps", n, sums)
}

// labels writes a sample's labels as {name=value,...}.
func labels(m *dto.Metric) string {
	var ls []string
	for _, l := range m.Label {
		ls = append(ls, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(ls, ",") + "}"
}

// jsonLog: with --log-format json every line of the agent's log is a JSON
// object, and the decisions that matter are there, once each.
func jsonLog(t *testing.T, ns string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDirOf(t, ns), agent.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Msg   string `json:"msg"`
			Level string `json:"level"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", l)
			continue
		}
		count[rec.Msg]++
	}
	for msg, want := range map[string]int{"falcon enabled": 1, "hook attached": 2, "container followed: RPS set": 1, "serving metrics": 1, "ready": 1} {
		if count[msg] != want {
			t.Errorf("log has %d lines %q, want %d:\n%s", count[msg], msg, want, b)
		}
	}
}
