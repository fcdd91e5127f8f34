package agent

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/policy"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/workload"
)

// TestNothingFreeNoTest: on 2 CPUs with the senders on CPU 0 (where the
// NIC's stage runs) and the receivers on the other, no CPU is free of the
// bottleneck, the applications and the NIC: the decision by cause knows it
// from the set alone, takes no turn (nothing read, nothing begun) and
// keeps falcon stood down, where the A/B test switched the path to
// measure. Nor does it sample the load, which nothing would read, and
// status, ready, shows none. (Its recording before turns stopped there is internal/cause's
// testdata/2cpu-vm-seqcheck-udp64.json.)
func TestNothingFreeNoTest(t *testing.T) {
	needTestbed(t)
	if runtime.NumCPU() != 2 {
		t.Skip("needs exactly 2 CPUs: with more, the receivers may run where a CPU is free")
	}
	if err := workload.CheckTools("taskset"); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := ibed(t, "cause", "docker", 2)
	warm(t, tb)
	o := testOptions(t, tb.Hosts[1].Netns)
	o.CPUs = []int{0, 1}
	a, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	m := a.mode.(*falconMode)
	sendCtx, stopSending := context.WithTimeout(ctx, 4*time.Second)
	defer stopSending()
	streamPairs(ctx, sendCtx, t, tb, 41350, seqcheck.SendOptions{Flows: 4, PktsPerFlow: 1 << 28, Size: 64}, 0)
	c := a.Activity().Causes
	t.Logf("turns: engage %d, inline %d, unreadable %d; begun %d; latest: %s", c.Engage, c.Inline, c.Unreadable, c.Begun, c.Last)
	if p := m.counters.Probes.Load(); p != 0 || c.Begun != 0 {
		t.Errorf("%d engagement tests begun (%d by cause), want none", p, c.Begun)
	}
	if c.Unreadable != 0 || c.Inline != 0 || c.Engage != 0 {
		t.Errorf("%d turns could not read the causes, %d read them: want no turn on a set too small", c.Unreadable, c.Inline+c.Engage)
	}
	if !m.dp.Config().StoodDown {
		t.Error("falcon still on the path")
	}
	if n := a.Activity().Samples; n != 0 {
		t.Errorf("%d load samples published by an agent that never comes on the path", n)
	}
	// By construction: a set of 2 CPUs never comes on the path, and
	// status says so in one line.
	if r, err := Status(o); err != nil {
		t.Error(err)
	} else {
		var b strings.Builder
		r.WriteText(&b)
		if !strings.Contains(b.String(), "path       never on it: the CPU set [0 1] has 2 CPUs") || !strings.Contains(b.String(), "load not sampled") {
			t.Errorf("status does not say falcon never comes on the path, nor samples:\n%s", b.String())
		}
		if !r.Ready || r.Problem != "" || r.Load != nil {
			t.Errorf("status: ready %v, problem %q, load %+v: want ready, no problem, no load", r.Ready, r.Problem, r.Load)
		}
	}
}

// TestCauseSwitches: an engagement by cause comes back on the path,
// engaged, with the datapath's load masked to the targets; a failed
// confirmation stands down, unmasked. (What the policy counts and how it
// backs off: internal/policy's TestCauseActs.)
func TestCauseSwitches(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 2)
	o := testOptions(t, tb.Hosts[1].Netns)
	// The paper policy runs no engagement loop: the test drives it.
	o.CPUs, o.Policy = []int{0, 1}, datapath.PolicyPaper
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	m, h := a.mode.(*falconMode), a.Host()
	if !m.standDown(h, "test") {
		t.Fatal("did not stand down with no traffic to drain")
	}
	if err := m.eng.Apply(policy.Verdict{Action: policy.Engage, Aim: true, Targets: []int{1}, Why: "test"}); err != nil {
		t.Fatal(err)
	}
	cfg := m.dp.Config()
	if cfg.StoodDown || !cfg.Engaged {
		t.Fatalf("begun: stood down %v, engaged %v", cfg.StoodDown, cfg.Engaged)
	}
	if tg := m.eng.Targets(); !slices.Equal(tg, []int{1}) {
		t.Errorf("targets %v", tg)
	}
	if err := m.eng.Apply(policy.Verdict{Action: policy.Disengage, Aim: true, Why: "test"}); err != nil {
		t.Fatal(err)
	}
	if !m.dp.Config().StoodDown || m.eng.Targets() != nil {
		t.Errorf("failed: stood down %v, targets %v", m.dp.Config().StoodDown, m.eng.Targets())
	}
}
