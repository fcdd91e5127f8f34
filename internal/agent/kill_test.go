package agent

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/workload"
)

// TestKilledAgentUnderTraffic: SIGKILL of an agent that is steering flows
// under saturating load reorders nothing; its programs stay attached
// (pinned links) and, once its load goes stale, decide nothing fresh but
// inline; a new agent started on its leftovers takes over and steers again.
// Both agents steer always on (killPolicy), so that flows are steered
// whatever the load: the kill, not the policy, is under test.
func TestKilledAgentUnderTraffic(t *testing.T) {
	needTestbed(t)
	if err := workload.CheckTools("taskset"); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tb := ibed(t, "akill", "docker", 2)
	warm(t, tb)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	killPolicy(&o)
	key, err := Key(o.Netns)
	if err != nil {
		t.Fatal(err)
	}
	k := &killRun{t: t, ctx: ctx, o: o, pinDir: o.pinDir(key), cmd: helperAgent(t, o, "paper")}
	sendCtx, stopSending := context.WithCancel(ctx)
	go func() {
		defer stopSending()
		time.Sleep(300 * time.Millisecond)
		if k.killWhenSteered() && k.watchStale() {
			k.takeOver()
		}
	}()
	runs := streamPairs(ctx, sendCtx, t, tb, 41350, seqcheck.SendOptions{Flows: 8, PktsPerFlow: 1 << 28, Size: 64}, 0)
	if k.restarted != nil {
		if err := k.restarted.Stop(); err != nil {
			t.Errorf("stop the restarted agent: %v", err)
		}
	}
	k.verdict(runs)
	if was, err := Disable(o); err != nil || was {
		t.Errorf("Disable after the restarted agent stopped: %v %v", was, err)
	}
	noTrace(t, tb, o)
}

// killRun is TestKilledAgentUnderTraffic's agent process cmd, killed while
// it steers flows, its programs left behind, and the agent that takes over.
type killRun struct {
	t      *testing.T
	ctx    context.Context
	o      Options
	pinDir string
	cmd    *exec.Cmd

	steeredAtKill, steeredAfter datapath.Pending
	movedAfter                  uint64
	atKill, before, after       datapath.Counters
	restarted                   *Agent
}

// killPolicy is the policy of TestKilledAgentUnderTraffic's agents: the
// paper's at 60 % on CPUs 0-1, so that flows move between the CPUs as the
// busy loop swings, and always on: with both CPUs saturated the set's
// average is above the threshold, and the paper policy would otherwise
// keep every flow inline (on 2 busy vCPUs: no flow steered in 40 s, 2 of
// 4 runs). Every fresh decision then steers.
func killPolicy(o *Options) {
	o.CPUs, o.Threshold, o.Policy, o.AlwaysOn = []int{0, 1}, 60, datapath.PolicyPaper, true
}

// swingLoad swings a busy loop between the CPUs n times, d on each.
func swingLoad(t *testing.T, n int, d time.Duration) bool {
	for i := range n {
		stop, err := burn(1 - i%2)
		if err != nil {
			t.Error(err)
			return false
		}
		time.Sleep(d)
		stop()
	}
	return true
}

// killWhenSteered swings until flows are steered, then kills the agent at
// once. Always on, the agent steers every flow it decides on fresh load:
// the deadline only guards against a hang.
func (k *killRun) killWhenSteered() bool {
swinging:
	for end, i := time.Now().Add(40*time.Second), 0; time.Now().Before(end); i++ {
		stop, err := burn(1 - i%2)
		if err != nil {
			k.t.Error(err)
			return false
		}
		for range 20 {
			time.Sleep(20 * time.Millisecond)
			if p, err := datapath.ReadSteered(k.pinDir); err == nil && p.Flows > 0 {
				k.cmd.Process.Kill()
				k.cmd.Wait()
				k.steeredAtKill = p
				stop()
				break swinging
			}
		}
		stop()
	}
	if k.steeredAtKill.Flows == 0 {
		k.t.Error("no flow was steered within 40 s, always on: the agent's programs steer nothing")
		return false
	}
	return true
}

// watchStale counts what the dead agent's programs decide from when its
// load is stale: they choose no CPU, and every flow goes inline once its
// guard lets it.
func (k *killRun) watchStale() bool {
	t := k.t
	cfg, _, _, _, err := datapath.ReadState(k.pinDir)
	if err == nil {
		k.atKill, err = datapath.ReadCounters(k.pinDir)
	}
	if err != nil {
		t.Errorf("after the kill: %v (the datapath's pins are gone)", err)
		return false
	}
	time.Sleep(cfg.StaleAfter + 50*time.Millisecond)
	if k.before, err = datapath.ReadCounters(k.pinDir); err != nil {
		t.Error(err)
		return false
	}
	if !swingLoad(t, 2, 350*time.Millisecond) {
		return false
	}
	if k.after, err = datapath.ReadCounters(k.pinDir); err != nil {
		t.Error(err)
		return false
	}
	if k.steeredAfter, err = datapath.ReadSteered(k.pinDir); err != nil {
		t.Error(err)
		return false
	}
	return true
}

// takeOver starts a new agent on the dead one's leftovers, under the same
// traffic, and swings until it moved a flow.
func (k *killRun) takeOver() {
	t := k.t
	var err error
	if k.restarted, err = Start(k.ctx, k.o); err != nil {
		t.Errorf("restart: %v", err)
		return
	}
	if pins, _ := filepath.Glob(filepath.Join(k.pinDir+deadSuffix, "*")); len(pins) > 0 {
		t.Errorf("the dead agent's pins outlived the takeover: %v", pins)
	}
	for end := time.Now().Add(40 * time.Second); ; {
		if !swingLoad(t, 2, 400*time.Millisecond) {
			return
		}
		if r, err := Status(k.o); err == nil && r.Totals != nil {
			k.movedAfter = r.Totals.Moved
		}
		if k.movedAfter > 0 || time.Now().After(end) {
			break
		}
	}
}

func (k *killRun) verdict(runs map[stagetrace.Flow]flowRun) {
	t := k.t
	var received, lost, reordered uint64
	for _, r := range runs {
		received += r.stats.Received
		lost += r.stats.Lost
		reordered += r.stats.Reordered + r.stats.Duplicates
	}
	before, after, atKill := k.before, k.after, k.atKill
	t.Logf("%d datagrams received, %d lost, %d reordered or duplicated; (flow, hook)s steered at the kill: %d, 1.05 s later: %d; moved by the restarted agent: %d",
		received, lost, reordered, k.steeredAtKill.Flows, k.steeredAfter.Flows, k.movedAfter)
	t.Logf("the dead agent's programs after the kill: moves to inline on stale load %d, guard holds %d, timeouts %d; fresh choices once the load was stale: %d",
		after.FallbackStale-atKill.FallbackStale, after.Holds-atKill.Holds, after.Timeouts-atKill.Timeouts,
		after.First+after.Second-before.First-before.Second)
	if reordered != 0 {
		t.Errorf("%d datagrams reordered or duplicated", reordered)
	}
	if k.steeredAtKill.Flows > 0 {
		if k.steeredAfter.Flows != 0 {
			t.Errorf("%d (flow, hook)s still steered a second after the kill", k.steeredAfter.Flows)
		}
		if after.First+after.Second != before.First+before.Second {
			t.Error("the dead agent's programs still chose CPUs on stale load")
		}
		if after.FlowletHits <= before.FlowletHits {
			t.Error("the dead agent's programs decided nothing: were they detached with it?")
		}
	}
	if k.restarted != nil && k.movedAfter == 0 {
		t.Error("the restarted agent moved no flow")
	}
}
