package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// mixedLoad is what one stretch of the soak's traffic did.
type mixedLoad struct {
	udp                   seqTotals
	tcpRuns               int
	tcpBits               float64 // summed Mbit/s of the runs, for the mean
	retransmits, ofoQueue int64
}

// runMixed runs, for d, sequenced UDP over both container pairs (steady
// and bursty flows, as the cycles drill), back-to-back iperf3 TCP runs of
// 10 s from the second client to the second server (each a new flow), and
// a busy loop swinging between the CPUs every 300 ms; during is called
// each minute and at the end, with the time so far.
func runMixed(ctx context.Context, t *testing.T, tb *testbed.Testbed, d time.Duration, portBase uint16, during func(time.Duration)) mixedLoad {
	t.Helper()
	var res mixedLoad
	clients, servers := tb.Endpoints()
	srvPort := int(portBase) + 10
	srv, err := workload.StartIperf3Server(ctx, servers[1].Netns, srvPort, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ofo := func() int64 {
		s, err := procfs.ReadSNMP(servers[1].Netns)
		if err != nil {
			t.Fatal(err)
		}
		return s["TcpExt"]["TCPOFOQueue"]
	}
	ofo0 := ofo()
	// Each flow has room for ~17 minutes at its rate here.
	tr, err := startTrafficProc(tb, []trafficGroup{
		{"steady", portBase, seqcheck.SendOptions{Flows: 8, PktsPerFlow: 1 << 23, Size: 64, Pause: 20 * time.Millisecond, PauseEvery: 500}},
		{"bursty", portBase + 1, seqcheck.SendOptions{Flows: 8, PktsPerFlow: 1 << 23, Size: 64, Pause: 150 * time.Millisecond, PauseEvery: 300}},
	}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stopHog := hogSwing(300 * time.Millisecond)
	start := time.Now()
	tcpCtx, stopTCP := context.WithCancel(ctx)
	var (
		wg     sync.WaitGroup
		tcpErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tcpCtx.Err() == nil && time.Since(start) < d-10*time.Second {
			r, err := workload.RunIperf3(tcpCtx, workload.Iperf3Opts{Netns: clients[1].Netns, Addr: servers[1].Addr,
				Port: srvPort, Duration: 10 * time.Second, CPUs: []int{0}})
			if err != nil {
				if tcpCtx.Err() == nil {
					tcpErr = err
				}
				return
			}
			res.tcpRuns++
			res.tcpBits += r.BitsPerSecond / 1e6
			res.retransmits += r.Retransmits
		}
	}()
	last := time.Duration(0)
	for next := time.Minute; time.Since(start) < d; {
		time.Sleep(min(time.Second, d-time.Since(start)))
		if el := time.Since(start); el >= next && during != nil {
			during(el)
			last = el
			next += time.Minute
		}
		if ctx.Err() != nil {
			break
		}
	}
	if el := time.Since(start); during != nil && el-last > 5*time.Second {
		during(el) // the end, while the traffic still runs
	}
	wg.Wait()
	stopTCP()
	if err := stopHog(); err != nil {
		t.Error(err)
	}
	res.udp, err = tr.finish()
	if err != nil {
		t.Error(err)
	}
	if tcpErr != nil {
		t.Errorf("iperf3: %v", tcpErr)
	}
	res.ofoQueue = ofo() - ofo0
	return res
}

func (m mixedLoad) String() string {
	mean := 0.0
	if m.tcpRuns > 0 {
		mean = m.tcpBits / float64(m.tcpRuns)
	}
	return fmt.Sprintf("UDP %d flows, %d datagrams received, %d reordered, %d duplicated; TCP %d runs of 10 s, %.0f Mbit/s on average, %d retransmits, TCPOFOQueue +%d",
		m.udp.flows, m.udp.received, m.udp.reordered, m.udp.duplicated, m.tcpRuns, mean, m.retransmits, m.ofoQueue)
}

// TestDrillSoak runs falcon for a long time under mixed traffic on the
// docker layout: sequenced UDP over both container pairs (flows that never
// pause long and flows that do), back-to-back iperf3 TCP runs, and a busy
// loop swinging between the CPUs, so that loads cross the threshold all
// the time. No UDP datagram may arrive out of order, no decision may fall
// back on stale load, TCP may queue no segment out of order where the same
// mix without falcon (a shorter run first) queued none, and the agent's
// process may not grow. Not in the suite: FALCON_DRILL_SOAK=10m runs it
// (results/reliability-2cpu-vm/reliability-soak.md); FALCON_DRILL_SOAK_BASELINE sets the run
// without falcon (45s), FALCON_DRILL_SOAK_POLICY the policy (paper, at a
// 60 % threshold and always on: it moves flows whenever a CPU's load
// crosses it, and both CPUs saturated do not keep every flow inline).
func TestDrillSoak(t *testing.T) {
	if os.Getenv("FALCON_DRILL_SOAK") == "" {
		t.Skip("a soak of minutes: FALCON_DRILL_SOAK=10m runs it")
	}
	needTestbed(t)
	noMemProfile(t)
	if err := workload.CheckTools("iperf3", "taskset"); err != nil {
		t.Skip(err)
	}
	dur := envDuration(t, "FALCON_DRILL_SOAK", 10*time.Minute)
	base := envDuration(t, "FALCON_DRILL_SOAK_BASELINE", 45*time.Second)
	policy := os.Getenv("FALCON_DRILL_SOAK_POLICY")
	if policy == "" {
		policy = datapath.PolicyPaper
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur+base+5*time.Minute)
	defer cancel()
	tb := ibed(t, "dsoak", "docker", 2)
	warm(t, tb)
	// TCP: h1's NIC takes the ACKs to CPU 0, where the client runs, so that
	// h1 does not reorder its own segments (reorder_test.go says why).
	write(t, tb.Hosts[0].Netns, "/sys/class/net/"+tb.Hosts[0].NIC+"/queues/rx-0/rps_cpus", "1")
	h := tb.Hosts[1]

	vanilla := runMixed(ctx, t, tb, base, 41270, nil)
	t.Logf("without falcon, %v: %s", base, vanilla)

	o := testOptions(t, h.Netns)
	o.CPUs, o.Threshold, o.Policy, o.AlwaysOn = []int{0, 1}, 60, policy, policy == datapath.PolicyPaper
	alog := newDrillLog("flows still steered", "stood down", "back on the path", "stale")
	o.Log = slog.New(slog.NewTextHandler(alog, nil))
	before := snapshotLeftovers(t, hostSide(h), o)
	a, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	before.record(t)
	stopped := false
	defer func() {
		if !stopped {
			a.Stop()
		}
	}()
	start := time.Now()
	var mems []memSample
	minute := 0
	withFalcon := runMixed(ctx, t, tb, dur, 41280, func(el time.Duration) {
		minute++
		mems = append(mems, sampleMem(start, minute))
		if r, err := Status(o); err == nil && r.Totals != nil {
			d := r.Totals
			t.Logf("%v: first %d, second %d, fallback %d (stale %d), moved %d, held %d, guard timeouts %d", el.Round(time.Second),
				d.First, d.Second, d.Fallback, d.FallbackStale, d.Moved, d.GuardHolds, d.GuardTimeouts)
		}
	})
	r, err := Status(o)
	if err != nil || r.Totals == nil {
		t.Fatalf("status: %+v %v", r, err)
	}
	tot := *r.Totals
	t.Logf("with falcon (policy %s), %v: %s", policy, dur, withFalcon)
	t.Logf("decisions: first %d, second %d, fallback %d (stale %d); guard: moved %d, held %d, timeouts %d; log: %d stand-downs, %d comebacks, %d drains that gave up",
		tot.First, tot.Second, tot.Fallback, tot.FallbackStale, tot.Moved, tot.GuardHolds, tot.GuardTimeouts,
		alog.count("stood down"), alog.count("back on the path"), alog.count("flows still steered"))
	for _, m := range mems {
		t.Logf("memory: %s (the cycle is the minute)", m)
	}

	soakVerdict(t, vanilla, withFalcon, base, dur, tot, policy, start, mems)
	stopped = true
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := before.check(t); len(left) > 0 {
		t.Errorf("left after disable:\n  %s", strings.Join(left, "\n  "))
	}
	if t.Failed() || os.Getenv("FALCON_DRILL_LOG") != "" {
		alog.dump(t)
	}
}

// soakVerdict holds the soak with falcon (dur) to the one without (base): no UDP
// reordered, no stale fallback, the guard exercised, no TCP segment queued
// out of order unless the kernel alone queued some, no growth.
func soakVerdict(t *testing.T, vanilla, withFalcon mixedLoad, base, dur time.Duration, tot Decisions, policy string, start time.Time, mems []memSample) {
	t.Helper()
	u := withFalcon.udp
	if u.reordered != 0 || u.duplicated != 0 {
		t.Errorf("UDP: %d of %d datagrams arrived out of order (%d duplicated)", u.reordered, u.received, u.duplicated)
		for _, at := range u.reorderedAt {
			t.Logf("  a reordered arrival %v into the soak", at.Sub(start).Round(time.Millisecond))
		}
	}
	if tot.FallbackStale != 0 {
		t.Errorf("%d decisions fell back on stale load", tot.FallbackStale)
	}
	if policy == datapath.PolicyPaper && tot.Moved == 0 {
		t.Error("no flow changed its target: the guard was not exercised")
	}
	switch {
	case vanilla.ofoQueue == 0 && withFalcon.ofoQueue != 0:
		t.Errorf("TCP: falcon queued %d segments out of order where the kernel alone queued none", withFalcon.ofoQueue)
	case vanilla.ofoQueue != 0:
		t.Logf("TCP: WITHOUT falcon the kernel itself queued %d segments out of order in %v (with falcon %d in %v): not held to 0",
			vanilla.ofoQueue, base, withFalcon.ofoQueue, dur)
	}
	if withFalcon.tcpRuns == 0 {
		t.Error("no TCP run completed")
	}
	if len(mems) >= 3 {
		if grew := flat(mems[0], mems[len(mems)-1]); len(grew) > 0 {
			t.Errorf("the agent's process grew from minute %d to the end: %s", mems[0].cycle, strings.Join(grew, ", "))
		}
	}
}
