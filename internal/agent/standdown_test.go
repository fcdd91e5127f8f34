package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/workload"
)

// Standing down leaves the host as it was without falcon: every value
// restored, no falcon program on any device (the guard's tracepoint
// programs are the datapath's own test); status says so and stays ready.
// Coming back attaches and sets everything again, and a disable after it
// leaves no trace.
//
// guest: the agent's stand-down and comeback on the old kernel
func TestStandDownAndBack(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 2)
	h := tb.Hosts[1]
	ov, err := discover.Discover(h.Netns)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ov)
	o := testOptions(t, h.Netns)
	// The paper policy runs no engagement test that could stand up or
	// down on its own meanwhile; the test drives both.
	o.Policy = datapath.PolicyPaper
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.Stop()
		}
	}()
	m := a.mode.(*falconMode)
	onPath := func() (steer, arrive int) {
		steer = strings.Count(attached(t, h.Netns), "falcon_steer")
		for _, c := range h.Containers {
			// The container's end has only the arrival counter: falcon_arrive
			// with tcx, a cls_bpf filter named as every falcon filter before 6.6.
			arrive += strings.Count(attached(t, c.Netns), "falcon_")
		}
		return steer, arrive
	}
	if s, ar := onPath(); s != 2 || ar != len(h.Containers) {
		t.Fatalf("enabled: %d hooks and %d arrival counters attached, want 2 and %d", s, ar, len(h.Containers))
	}

	if !m.standDown(a.Host(), "test") {
		t.Fatal("did not stand down with no traffic to drain")
	}
	for k, v := range snapshot(t, ov) {
		if before[k] != v {
			t.Errorf("stood down: %s = %q, was %q before enable", k, v, before[k])
		}
	}
	if s, ar := onPath(); s != 0 || ar != 0 {
		t.Errorf("stood down: %d hooks and %d arrival counters still attached", s, ar)
	}
	r, err := Status(o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.StoodDown || r.Steering || !r.Ready || r.Problem != "" {
		t.Errorf("stood down: status stood_down %v steering %v ready %v problem %q", r.StoodDown, r.Steering, r.Ready, r.Problem)
	}
	if err := m.Update(a.Host(), ov); err != nil { // a rescan attaches nothing while it stands down
		t.Fatal(err)
	}
	if s, _ := onPath(); s != 0 {
		t.Errorf("an update attached %d hooks while falcon stood down", s)
	}

	m.standUp(a.Host(), "test")
	mask := cpuset.Mask(a.Host().Opts.CPUs)
	if got := read(t, h.Netns, "/sys/class/net/"+h.Overlay+"/queues/rx-0/rps_cpus"); got != mask {
		t.Errorf("back: %s rps_cpus = %s, want %s", h.Overlay, got, mask)
	}
	if s, ar := onPath(); s != 2 || ar != len(h.Containers) {
		t.Errorf("back: %d hooks and %d arrival counters attached, want 2 and %d", s, ar, len(h.Containers))
	}
	if r, err := Status(o); err != nil || r.StoodDown || !r.Ready {
		t.Errorf("back: status %+v, %v", r, err)
	}

	stopped = true
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	noTrace(t, tb, o)
}

// TestComebackSteersRunningFlows: flows that run through a comeback, never
// pausing, are steered by the agent that comes back (their guard counts
// the hooks' own marked packets, not the older ones still queued) and
// stay in order. Before the hooks marked their packets, such flows stayed
// inline until they paused for the guard timeout: never, here.
//
// guest: the guard's marks on a comeback, on the old kernel
func TestComebackSteersRunningFlows(t *testing.T) {
	needTestbed(t)
	if err := workload.CheckTools("taskset"); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := ibed(t, "cback", "docker", 2)
	warm(t, tb)
	o := testOptions(t, tb.Hosts[1].Netns)
	// Paper: no engagement test stands up or down on its own. Always on,
	// at 100 %: every flow moves off inline when the comeback's drain
	// ends, and more as the busy loop saturates one CPU, then the other.
	// (Without always on, the flows alone can keep both CPUs' average at
	// the threshold, where the paper's rule keeps every stage inline: at
	// 60 % nothing moved in a guest under emulation.)
	o.CPUs, o.Threshold, o.Policy, o.AlwaysOn = []int{0, 1}, 100, datapath.PolicyPaper, true
	a, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	m := a.mode.(*falconMode)
	if !m.standDown(a.Host(), "test") {
		t.Fatal("did not stand down with no traffic to drain")
	}

	sendCtx, stopSending := context.WithCancel(ctx)
	var moved uint64
	var loads []string // what the datapath decided with, at each check
	go func() {
		defer stopSending()
		// The flows run for half a second unseen, then through the
		// comeback and two swings of a busy loop between the CPUs.
		time.Sleep(500 * time.Millisecond)
		m.standUp(a.Host(), "test")
		// At least two swings; more until a flow has moved, for a
		// guest under emulation, where a swing's samples come slowly.
		deadline := time.Now().Add(40 * time.Second)
		for i := 0; ; i++ {
			stop, err := burn(1 - i%2)
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(400 * time.Millisecond)
			stop()
			if i%2 == 0 {
				continue
			}
			if r, err := Status(o); err == nil && r.Totals != nil {
				moved = r.Totals.Moved
				if r.Load != nil {
					loads = append(loads, fmt.Sprintf("%v avg %d", r.Load.PerCPU, r.Load.Avg))
				}
			}
			if moved > 0 && i >= 3 || time.Now().After(deadline) {
				return
			}
		}
	}()
	// No pause: no flow is ever idle for the guard timeout.
	runs := streamPairs(ctx, sendCtx, t, tb, 41330, seqcheck.SendOptions{Flows: 8, PktsPerFlow: 1 << 28, Size: 64}, 0)
	sent, reordered := orderOf(t, runs)
	var timeouts uint64
	if r, err := Status(o); err == nil && r.Totals != nil {
		timeouts = r.Totals.GuardTimeouts
		// Why nothing moved, if nothing did: every choice inline (no CPU
		// with room) or held by the guard.
		t.Logf("decisions: %+v; load at each check: %s", *r.Totals, strings.Join(loads, "; "))
	}
	t.Logf("%d datagrams received, %d reordered or duplicated; (flow, hook)s moved after the comeback: %d, %d of them by the guard's timeout",
		sent, reordered, moved, timeouts)
	if reordered != 0 {
		t.Errorf("%d datagrams reordered or duplicated", reordered)
	}
	if moved == 0 {
		t.Error("no running flow was moved after the comeback")
	}
}

// TestEngagementTestReordersNothing: the engagement test switches falcon
// on and off the path every window while it tests (the off windows are
// stood down, every program detached and RPS restored); flows at full
// rate through those switches stay in order, with and without the NIC
// stage split. The test runs the engagement tests itself, under an agent
// of the paper policy, always on, which runs none of its own: when the
// adaptive policy begins one depends on the load (internal/cause replays
// recorded causes for that), what its switches do to the flows does not.
func TestEngagementTestReordersNothing(t *testing.T) {
	needTestbed(t)
	if err := workload.CheckTools("taskset"); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		name, layout string
		split        bool
	}{{"pipelining", "docker", false}, {"split", "docker", true}, {"pipelining-ipv6", "docker-ipv6", false}} {
		t.Run(c.name, func(t *testing.T) { engagementSwitches(t, c.layout, c.split) })
	}
}

// engagementTests is how many engagement tests engagementSwitches runs:
// each switches falcon off the path and back on.
const engagementTests = 2

// engagementSwitches runs 8 full-rate flows through engagementTests
// engagement tests, each of which must end in a verdict: full-rate traffic
// is never too thin to tell (over IPv6 the test counts what the containers
// receive in snmp6's Udp6).
func engagementSwitches(t *testing.T, layout string, split bool) {
	if split {
		needSplit(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := ibed(t, "engt", layout, 2)
	warm(t, tb)
	o := testOptions(t, tb.Hosts[1].Netns)
	o.CPUs, o.Policy, o.AlwaysOn = []int{0, 1}, datapath.PolicyPaper, true
	if split {
		o.Split, o.SplitCPUs = true, []int{1}
	}
	a, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	m := a.mode.(*falconMode)
	sendCtx, stopSending := context.WithCancel(ctx)
	verdicts := make(chan int, 1)
	go func() {
		defer stopSending()
		n := 0
		// The flows run on the path before the first switch and after
		// the last.
		time.Sleep(300 * time.Millisecond)
		for range engagementTests {
			if _, ok := m.eng.Probe(ctx); ok {
				n++
			}
		}
		time.Sleep(300 * time.Millisecond)
		verdicts <- n
	}()
	runs := streamPairs(ctx, sendCtx, t, tb, 41340, seqcheck.SendOptions{Flows: 8, PktsPerFlow: 1 << 28, Size: 64}, 0)
	got, reordered := orderOf(t, runs)
	if r, err := Status(o); err == nil {
		full, before := queueDrops(r)
		t.Logf("decisions since the last comeback: %+v; split: cpumap queue drops %d, split's drops before the queue filled %d",
			r.Totals, full, before)
	}
	n := <-verdicts
	t.Logf("%d datagrams received, %d reordered or duplicated; engagement tests %d (%d with too little traffic to tell), verdicts %d, for steering %d",
		got, reordered, m.counters.Probes.Load(), m.counters.Thin.Load(), m.counters.Tested.Load(), m.counters.Won.Load())
	if reordered != 0 {
		t.Errorf("%d datagrams reordered or duplicated", reordered)
	}
	if n != engagementTests {
		t.Errorf("%d of %d engagement tests ended in a verdict (%d too thin to tell): the others failed to switch", n, engagementTests, m.counters.Thin.Load())
	}
}
