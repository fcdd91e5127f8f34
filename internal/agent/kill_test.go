package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/workload"
)

// TestKilledAgentUnderTraffic: SIGKILL of an agent that is moving flows
// under saturating load reorders nothing; its programs stay attached
// (pinned links) and, once its load goes stale, decide nothing fresh but
// inline; a new agent started on its leftovers takes over and steers again.
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
	// Paper at 60 %: flows move whenever a CPU's load crosses it.
	o.CPUs, o.Threshold, o.Policy = []int{0, 1}, 60, datapath.PolicyPaper
	key, err := Key(o.Netns)
	if err != nil {
		t.Fatal(err)
	}
	pinDir := o.pinDir(key)

	cmd := helperAgent(t, o, "paper")

	var (
		steeredAtKill, steeredAfter datapath.Pending
		movedAfter                  uint64
		atKill, before, after       datapath.Counters
		restarted                   *Agent
	)
	swing := func(n int, d time.Duration) bool {
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
	sendCtx, stopSending := context.WithCancel(ctx)
	go func() {
		defer stopSending()
		time.Sleep(300 * time.Millisecond)
		// Swing until flows are steered, then kill the agent at once.
	swinging:
		for end, i := time.Now().Add(40*time.Second), 0; time.Now().Before(end); i++ {
			stop, err := burn(1 - i%2)
			if err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				time.Sleep(20 * time.Millisecond)
				if p, err := datapath.ReadSteered(pinDir); err == nil && p.Flows > 0 {
					cmd.Process.Kill()
					cmd.Wait()
					steeredAtKill = p
					stop()
					break swinging
				}
			}
			stop()
		}
		if steeredAtKill.Flows == 0 {
			t.Error("no flow was steered within 40 s of swings")
			return
		}
		// From when the load is stale, the dead agent's programs choose
		// no CPU: every flow goes inline once its guard lets it.
		cfg, _, _, _, err := datapath.ReadState(pinDir)
		if err == nil {
			atKill, err = datapath.ReadCounters(pinDir)
		}
		if err != nil {
			t.Errorf("after the kill: %v (the datapath's pins are gone)", err)
			return
		}
		time.Sleep(cfg.StaleAfter + 50*time.Millisecond)
		if before, err = datapath.ReadCounters(pinDir); err != nil {
			t.Error(err)
			return
		}
		if !swing(2, 350*time.Millisecond) {
			return
		}
		if after, err = datapath.ReadCounters(pinDir); err != nil {
			t.Error(err)
			return
		}
		if steeredAfter, err = datapath.ReadSteered(pinDir); err != nil {
			t.Error(err)
			return
		}
		// A new agent on the dead one's leftovers, under the same traffic.
		if restarted, err = Start(ctx, o); err != nil {
			t.Errorf("restart: %v", err)
			return
		}
		if pins, _ := filepath.Glob(filepath.Join(pinDir+deadSuffix, "*")); len(pins) > 0 {
			t.Errorf("the dead agent's pins outlived the takeover: %v", pins)
		}
		for end := time.Now().Add(40 * time.Second); ; {
			if !swing(2, 400*time.Millisecond) {
				return
			}
			if r, err := Status(o); err == nil && r.Totals != nil {
				movedAfter = r.Totals.Moved
			}
			if movedAfter > 0 || time.Now().After(end) {
				break
			}
		}
	}()
	runs := streamPairs(ctx, sendCtx, t, tb, 41350, seqcheck.SendOptions{Flows: 8, PktsPerFlow: 1 << 28, Size: 64}, 0)
	if restarted != nil {
		if err := restarted.Stop(); err != nil {
			t.Errorf("stop the restarted agent: %v", err)
		}
	}
	var received, lost, reordered uint64
	for _, r := range runs {
		received += r.stats.Received
		lost += r.stats.Lost
		reordered += r.stats.Reordered + r.stats.Duplicates
	}
	t.Logf("%d datagrams received, %d lost, %d reordered or duplicated; (flow, hook)s steered at the kill: %d, 1.05 s later: %d; moved by the restarted agent: %d",
		received, lost, reordered, steeredAtKill.Flows, steeredAfter.Flows, movedAfter)
	t.Logf("the dead agent's programs after the kill: moves to inline on stale load %d, guard holds %d, timeouts %d; fresh choices once the load was stale: %d",
		after.FallbackStale-atKill.FallbackStale, after.Holds-atKill.Holds, after.Timeouts-atKill.Timeouts,
		after.First+after.Second-before.First-before.Second)
	if reordered != 0 {
		t.Errorf("%d datagrams reordered or duplicated", reordered)
	}
	if steeredAtKill.Flows > 0 {
		if steeredAfter.Flows != 0 {
			t.Errorf("%d (flow, hook)s still steered a second after the kill", steeredAfter.Flows)
		}
		if after.First+after.Second != before.First+before.Second {
			t.Error("the dead agent's programs still chose CPUs on stale load")
		}
		if after.FlowletHits <= before.FlowletHits {
			t.Error("the dead agent's programs decided nothing: were they detached with it?")
		}
	}
	if restarted != nil && movedAfter == 0 {
		t.Error("the restarted agent moved no flow")
	}
	if was, err := Disable(o); err != nil || was {
		t.Errorf("Disable after the restarted agent stopped: %v %v", was, err)
	}
	noTrace(t, tb, o)
}
