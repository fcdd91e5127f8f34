package agent

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// TestNoReorderingUnderLoadChanges runs traffic through falcon while the
// load under it changes, on each container layout, and counts what arrives
// out of order:
//   - UDP: 16 sequenced flows per container pair, paced so that every flow
//     idles 2 ms (longer than the 1 ms flowlet gap) between bursts and so
//     gets fresh decisions all along, while a busy loop is pinned to CPU 1,
//     then to CPU 0. With the threshold at 60 % the hooks move flows to
//     their second choice and switch themselves off and on again: the
//     datapath's counters must show both first choices and second choices
//     or fallbacks, and no datagram may arrive out of order;
//   - TCP: iperf3 under the same load changes, counted by TcpExt
//     TCPOFOQueue in the receiving container. The same run without falcon
//     comes first: only if that one queues nothing out of order is falcon
//     held to zero.
func TestNoReorderingUnderLoadChanges(t *testing.T) {
	needTestbed(t)
	if err := workload.CheckTools("iperf3", "taskset"); err != nil {
		t.Skip(err)
	}
	for _, layout := range []string{"docker", "flannel", "calico", "flannel-daemon", "docker-swarm"} {
		t.Run(layout, func(t *testing.T) { reorderOn(t, layout) })
	}
	t.Run("host-plus", reorderHostPlus)
}

// reorderHostPlus is the same for FALCON's Host+, the host's own NIC split
// over both CPUs (no overlay: the split is the only stage that moves),
// its decisions changing with the load.
func reorderHostPlus(t *testing.T) {
	needSplit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := ibed(t, "rhos", "host", 0)
	h2 := tb.Hosts[1]
	warm(t, tb)
	write(t, tb.Hosts[0].Netns, "/sys/class/net/"+tb.Hosts[0].NIC+"/queues/rx-0/rps_cpus", "1") // reorderOn says why
	vanilla := tcpOFO(ctx, t, tb)
	o := testOptions(t, h2.Netns)
	o.CPUs, o.Threshold, o.Policy = []int{0, 1}, 60, datapath.PolicyPaper
	o.Split, o.HostNICs = true, []string{h2.NIC}
	a, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Stop() }()

	const port = 41237
	tr, err := stagetrace.Start(stagetrace.Options{Netns: []string{h2.Netns}, Proto: 17, PortMin: port, PortMax: port})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	calmed := calm(t, o, uint32(o.Threshold)-10)
	r0 := status(t, o)
	var runs map[stagetrace.Flow]flowRun
	loadChanges(ctx, t, func() {
		runs = sendPairs(ctx, t, tb, port, seqcheck.SendOptions{Flows: 16, PktsPerFlow: 3000, Size: 64,
			Pause: 2 * time.Millisecond, PauseEvery: 12})
	})
	r1 := status(t, o)
	recs, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, st := range stagetrace.StagesByFlow(recs) {
		if len(st[h2.Netns+"/"+h2.NIC]) > 1 {
			moved++
		}
	}
	lost := inOrder(t, runs)
	sp := hookDelta(t, r0, r1, "split", h2.Netns, h2.NIC)
	d := sp.Decisions
	t.Logf("UDP: %d flows, %d datagrams lost; %d flows' NIC stage ran on both CPUs; split decisions %+v, sent to %v",
		len(runs), lost, moved, d, sp.SteeredTo)
	switch {
	case d.Second+d.Fallback == 0:
		t.Errorf("split hook: %+v: a CPU at 100 %% did not change its decisions", d)
	case d.First == 0 && calmed:
		t.Errorf("split hook: %+v: no first choice, although the run started below the threshold", d)
	}

	tcpNoWorse(t, vanilla, tcpOFO(ctx, t, tb))
	toggle(ctx, t, tb, &a, o, "split")
}

func reorderOn(t *testing.T, layout string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := ibed(t, "r"+layout[:3], layout, 2)
	h2 := tb.Hosts[1]
	warm(t, tb)

	// TCP sends from wherever h1 processes ACKs, which arrive on the CPU
	// that sent them on h2: two CPUs of h1 would then send one flow at once
	// and reorder it before it reaches h2, falcon or not. RPS on h1's NIC
	// takes the ACKs to CPU 0, where the client runs, as the UDP sender
	// does.
	write(t, tb.Hosts[0].Netns, "/sys/class/net/"+tb.Hosts[0].NIC+"/queues/rx-0/rps_cpus", "1")
	vanilla := tcpOFO(ctx, t, tb)
	o := testOptions(t, h2.Netns)
	o.CPUs, o.Threshold = []int{0, 1}, 60
	o.Policy = datapath.PolicyPaper // it moves flows whenever load crosses the threshold: the guard's hardest case
	a, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Stop() }()

	const port = 41235
	tr, err := stagetrace.Start(stagetrace.Options{Netns: hostSide(h2), Proto: 17, PortMin: port, PortMax: port})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// Start below the threshold, so that the load changes switch falcon
	// off and on again.
	calmed := calm(t, o, uint32(o.Threshold)-10)
	r0 := status(t, o)
	var runs map[stagetrace.Flow]flowRun
	loadChanges(ctx, t, func() {
		runs = sendPairs(ctx, t, tb, port, seqcheck.SendOptions{Flows: 16, PktsPerFlow: 3000, Size: 64,
			Pause: 2 * time.Millisecond, PauseEvery: 12})
	})
	r1 := status(t, o)
	recs, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	lost := inOrder(t, runs)
	moved := 0
	for _, st := range stagetrace.StagesByFlow(recs) {
		for _, per := range st {
			if len(per) > 1 {
				moved++
			}
		}
	}
	nic, ovl := hookDelta(t, r0, r1, "nic", h2.Netns, h2.NIC), hookDelta(t, r0, r1, "overlay", h2.OverlayNS(), h2.Overlay)
	t.Logf("UDP: %d flows, %d datagrams lost; %d (flow, device) stages ran on both CPUs over the run; decisions: nic %+v, overlay %+v",
		len(runs), lost, moved, nic.Decisions, ovl.Decisions)
	for _, h := range []StageReport{nic, ovl} {
		d := h.Decisions
		switch {
		case d.Second+d.Fallback == 0:
			t.Errorf("%s hook: %+v: a CPU at 100 %% did not change its decisions", h.Role, d)
		case d.First == 0 && calmed:
			t.Errorf("%s hook: %+v: no first choice, although the run started below the threshold", h.Role, d)
		case d.First == 0:
			t.Logf("%s hook: the machine was busy throughout: falcon stayed off, and only that was tested", h.Role)
		}
	}

	tcpNoWorse(t, vanilla, tcpOFO(ctx, t, tb))

	toggle(ctx, t, tb, &a, o, "nic")
}

// inOrder wants every datagram of runs in order and none twice; it
// returns how many were lost.
func inOrder(t *testing.T, runs map[stagetrace.Flow]flowRun) (lost uint64) {
	t.Helper()
	for _, f := range sortedFlows(runs) {
		s := runs[f].stats
		lost += s.Lost
		if s.Reordered != 0 || s.Duplicates != 0 {
			t.Errorf("%s: %d of %d datagrams arrived out of order (%d duplicated)", f, s.Reordered, s.Received, s.Duplicates)
		}
	}
	return lost
}

// toggle disables falcon under a stream of unpaced flows, which never give
// a flowlet gap, enables it again, and stops the stream once packets went
// through the new datapath: none may arrive out of order. *a is the agent,
// and then the new one, so that the caller's deferred Stop always stops the
// one running, however the test ends. role is the hook that sees every
// packet first (nic; split on a host NIC).
func toggle(ctx context.Context, t *testing.T, tb *testbed.Testbed, a **Agent, o Options, role string) {
	t.Helper()
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	var (
		wg      sync.WaitGroup
		through uint64 // packets the new datapath's NIC hook saw while the stream ran
		errs    []error
	)
	// Also when the stream fails the test: the agent the goroutine starts
	// must be in *a before the caller's deferred Stop runs.
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stopSending()
		time.Sleep(150 * time.Millisecond)
		if err := (*a).Stop(); err != nil {
			errs = append(errs, fmt.Errorf("disable under traffic: %w", err))
			return
		}
		time.Sleep(100 * time.Millisecond)
		next, err := Start(ctx, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("enable under traffic: %w", err))
			return
		}
		*a = next
		r0, err := Status(o)
		if err != nil {
			errs = append(errs, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
		r1, err := Status(o)
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, s := range r1.Stages {
			if string(s.Role) == role {
				for c, n := range s.RanOn {
					through += n - ranOn(r0, role, c)
				}
			}
		}
	}()
	runs := streamPairs(ctx, sendCtx, t, tb, 41236, seqcheck.SendOptions{Flows: 16, PktsPerFlow: 1 << 24, Size: 64},
		300*time.Millisecond)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	var received uint64
	for _, f := range sortedFlows(runs) {
		s := runs[f].stats
		received += s.Received
		if s.Reordered != 0 || s.Duplicates != 0 {
			t.Errorf("%s: %d of %d datagrams arrived out of order (%d duplicated) across disable and enable", f, s.Reordered, s.Received, s.Duplicates)
		}
	}
	t.Logf("disable and enable under %d flows: %d datagrams received, %d of them through the re-enabled datapath", len(runs), received, through)
	if through == 0 {
		t.Error("the stream ended before the re-enabled datapath saw it: enable under traffic was not tested")
	}
}

// ranOn is what the hook of a role counted on cpu in a report.
func ranOn(r *Report, role string, cpu int) uint64 {
	for _, s := range r.Stages {
		if string(s.Role) == role {
			return s.RanOn[cpu]
		}
	}
	return 0
}

// loadChanges runs fn while a busy loop comes and goes on CPU 1, then on
// CPU 0; it returns when fn does, with no busy loop left, also when fn
// fails the test.
func loadChanges(ctx context.Context, t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, step := range []struct {
			cpu         int
			after, for_ time.Duration
		}{{1, 150 * time.Millisecond, 400 * time.Millisecond}, {0, 250 * time.Millisecond, 250 * time.Millisecond}} {
			select {
			case <-done:
				return
			case <-time.After(step.after):
			}
			var stop func()
			if stop, err = burn(step.cpu); err != nil {
				return
			}
			select {
			case <-done:
			case <-time.After(step.for_):
			}
			stop()
		}
	}()
	func() {
		defer func() {
			close(done)
			wg.Wait()
		}()
		fn()
	}()
	if err != nil {
		t.Fatal(err)
	}
}

// swinging runs fn while a busy loop swings between CPU 1 and CPU 0 every
// 300 ms, calling each(i) after swing i when given; it returns when fn
// does (or when each fails), with no busy loop left, and the first error
// of the loop or of each.
func swinging(fn func(), each func(i int) error) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var err error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			var stop func()
			if stop, err = burn(1 - i%2); err != nil {
				return
			}
			select {
			case <-done:
				stop()
				return
			case <-time.After(300 * time.Millisecond):
			}
			stop()
			if each != nil {
				if err = each(i); err != nil {
					return
				}
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	return err
}

// burn starts a busy loop pinned to cpu and returns what stops it.
func burn(cpu int) (stop func(), err error) {
	cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("busy loop on CPU %d: %w", cpu, err)
	}
	return func() {
		cmd.Process.Kill()
		cmd.Wait()
	}, nil
}

// tcpOFO runs one iperf3 TCP stream from h1's first container to h2's
// under loadChanges and returns what arrived out of order.
func tcpOFO(ctx context.Context, t *testing.T, tb *testbed.Testbed) tcpResult {
	t.Helper()
	r := tcpFlow(ctx, t, tb, 5301, time.Second, nil, func(run func()) { loadChanges(ctx, t, run) })
	t.Logf("TCP: %.0f Mbit/s, %d retransmits, TCPOFOQueue +%d, %d of %d segments reordered", r.BitsPerSecond/1e6, r.Retransmits, r.ofo,
		r.reordered, r.segs)
	return r
}

// tcpNoWorse holds falcon's run to 0 where the same load without falcon
// had none: segments reordered (exact), and queued out of order
// (TCPOFOQueue) when nothing was retransmitted: a loss queues the
// segments behind its hole too (a rehearsal once: 12 queued, 23 retransmits, 0 of
// 352 321 reordered).
func tcpNoWorse(t *testing.T, vanilla, falcon tcpResult) {
	t.Helper()
	if vanilla.reordered == 0 && falcon.reordered != 0 {
		t.Errorf("TCP: %d of %d segments reached the receiver after one sent later, none without falcon", falcon.reordered, falcon.segs)
	}
	if vanilla.ofo == 0 && falcon.ofo != 0 && falcon.Retransmits == 0 {
		t.Errorf("TCP: falcon queued %d segments out of order where the kernel alone queued none (%d retransmits)", falcon.ofo, falcon.Retransmits)
	}
}

// tcpResult is a tcpFlow's iperf3 result, its receiver's TCPOFOQueue
// delta and its sender's count of reorderings it detected (TcpExt
// TCPSACKReorder, TCPTSReorder, TCPRenoReorder). A segment queued out of
// order waits behind a hole: a reordered segment, or one lost on the way,
// whose retransmit fills it; the sender guesses which from the
// acknowledgements (SACK, timestamps), and a segment only delayed long
// enough to be retransmitted counts there too. reordered is exact: the
// data segments that reached the server's last device after one its
// sender transmitted later (by IPv4 ID, stagetrace's sequence device), of
// segs seen there.
type tcpResult struct {
	workload.Iperf3Result
	ofo, senderReorder int64
	// rehash: the times the sender gave its socket a new hash (TcpExt
	// TCPTimeoutRehash, TCPDuplicateDataRehash), which moves an
	// overlay's flow to another outer source port.
	rehash          int64
	reordered, segs uint64
	first           *stagetrace.Inversion // the first reordered segment
}

// tcpFlow runs one iperf3 TCP flow of d from h1's first container (on CPU
// 0) to h2's (its server on srvCPUs), inside around, and counts what the
// receiver queued out of order.
func tcpFlow(ctx context.Context, t *testing.T, tb *testbed.Testbed, port int, d time.Duration, srvCPUs []int, around func(run func())) tcpResult {
	t.Helper()
	clients, servers := tb.Endpoints()
	srv, err := workload.StartIperf3Server(ctx, servers[0].Netns, port, srvCPUs)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	tcpExt := func(ns string) map[string]int64 {
		s, err := procfs.ReadSNMP(ns)
		if err != nil {
			t.Fatal(err)
		}
		return s["TcpExt"]
	}
	counts := func() (ofo, reorder, rehash int64) {
		tx := tcpExt(clients[0].Netns)
		return tcpExt(servers[0].Netns)["TCPOFOQueue"], tx["TCPSACKReorder"] + tx["TCPTSReorder"] + tx["TCPRenoReorder"],
			tx["TcpTimeoutRehash"] + tx["TcpDuplicateDataRehash"]
	}
	// The receiving host's devices too, for the way a reordered segment
	// took (SeqPaths).
	sv := stagetrace.Device{Netns: servers[0].Netns, Name: servers[0].Dev}
	tr, err := stagetrace.Start(stagetrace.Options{Netns: []string{sv.Netns, tb.Hosts[1].Netns}, Proto: 6,
		PortMin: uint16(port), PortMax: uint16(port), Seq: []stagetrace.Device{sv}, SeqPaths: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ofo0, reorder0, rehash0 := counts()
	var res workload.Iperf3Result
	around(func() {
		res, err = workload.RunIperf3(ctx, workload.Iperf3Opts{Netns: clients[0].Netns, Addr: servers[0].Addr,
			Port: port, Duration: d, CPUs: []int{0}})
	})
	if err != nil {
		t.Fatal(err)
	}
	ofo1, reorder1, rehash1 := counts()
	r := tcpResult{Iperf3Result: res, ofo: ofo1 - ofo0, senderReorder: reorder1 - reorder0, rehash: rehash1 - rehash0}
	order, err := tr.Reordering()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range order {
		if o.Flow.Dport == uint16(port) {
			r.reordered += o.Reordered
			r.segs += o.Seen
			if o.First != nil && (r.first == nil || o.First.At < r.first.At) {
				r.first = o.First
			}
		}
	}
	if r.segs == 0 {
		t.Fatalf("no data segment of port %d seen at %s: the order check saw nothing", port, sv)
	}
	return r
}
