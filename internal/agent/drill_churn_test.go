package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/testbed"
)

// stageKey is the ordering guard's key of a stage device (struct
// stage_dev in bpf/datapath.h): the namespace's inode and the ifindex.
type stageKey struct{ NetnsIno, Ifindex uint32 }

// endState is what the agent applied to a container's end, read from the
// kernel and the agent's state file.
type endState struct {
	key      stageKey
	rps      []string // rps_cpus of every rx queue
	flowCnt  []string // rps_flow_cnt of every rx queue
	arrival  bool     // falcon_arrive on its ingress (tcx or a cls_bpf filter)
	stage    bool     // registered with the guard
	recorded bool     // the arrival hook is in the state file
}

// readEnd reads the state of eth0 in container namespace ns.
func readEnd(ns string, stages *ebpf.Map, stateDir string) (endState, error) {
	var e endState
	ino, err := netns.Inode(ns)
	if err != nil {
		return e, err
	}
	e.key.NetnsIno = uint32(ino)
	err = netns.Do(ns, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		e.key.Ifindex = uint32(l.Attrs().Index)
		if res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress}); err == nil {
			for _, p := range res.Programs {
				if prog, err := ebpf.NewProgramFromID(p.ID); err == nil {
					if info, err := prog.Info(); err == nil && info.Name == "falcon_arrive" {
						e.arrival = true
					}
					prog.Close()
				}
			}
		}
		fs, err := netlink.FilterList(l, netlink.HANDLE_MIN_INGRESS)
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			return err // a change meanwhile: the caller reads again, rather than see no counter
		}
		if err == nil {
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, "falcon") {
					e.arrival = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	err = netns.WithSysfs(ns, func(root string) error {
		for _, attr := range []string{"rps_cpus", "rps_flow_cnt"} {
			ps, _ := filepath.Glob(filepath.Join(root, "class/net/eth0/queues/rx-*", attr))
			for _, p := range ps {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if attr == "rps_cpus" {
					e.rps = append(e.rps, strings.TrimSpace(string(b)))
				} else {
					e.flowCnt = append(e.flowCnt, strings.TrimSpace(string(b)))
				}
			}
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	var kind uint32
	e.stage = stages.Lookup(&e.key, &kind) == nil
	if st, err := readState(stateDir); err == nil {
		for _, hk := range st.Hooks {
			e.recorded = e.recorded || hk.Netns == ns && hk.Role == datapath.HookArrival
		}
	}
	return e, nil
}

// lacks says what the end lacks of being steered over mask ("" when nothing).
func (e endState) lacks(mask string) string {
	var s []string
	if len(e.rps) == 0 || slices.ContainsFunc(e.rps, func(v string) bool { return v != mask }) {
		s = append(s, fmt.Sprintf("rps_cpus %v", e.rps))
	}
	if slices.ContainsFunc(e.flowCnt, func(v string) bool { return v != "0" }) {
		s = append(s, fmt.Sprintf("rps_flow_cnt %v", e.flowCnt))
	}
	if !e.arrival {
		s = append(s, "no arrival counter")
	}
	if !e.stage {
		s = append(s, "not registered with the guard")
	}
	if !e.recorded {
		s = append(s, "no arrival hook in the state file")
	}
	return strings.Join(s, ", ")
}

// churned is one container the drill added.
type churned struct {
	c         testbed.Container
	key       stageKey
	added     time.Time
	steeredIn time.Duration // 0 until steered
	lacked    string        // what it lacked when last looked at
	removed   time.Time
	prunedIn  time.Duration
	left      string // what was left of it when last looked at
	leftAt1s  string // what was left of it a second after its removal
}

// remnants says what the agent still holds of a removed container.
func remnants(a *Agent, c *churned, stages *ebpf.Map, liveKeys map[stageKey]bool) string {
	var s []string
	var kind uint32
	if !liveKeys[c.key] && stages.Lookup(&c.key, &kind) == nil {
		s = append(s, fmt.Sprintf("guard stage %+v", c.key))
	}
	for _, e := range a.Host().journal.Entries() {
		if e.Netns == c.c.Netns {
			s = append(s, "journal "+e.Path)
		}
	}
	if st, err := readState(a.Host().Dir); err == nil {
		for _, hk := range st.Hooks {
			if hk.Netns == c.c.Netns {
				s = append(s, "state hook "+hk.String())
			}
		}
	}
	return strings.Join(s, ", ")
}

// quantile of sorted durations.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// TestDrillContainerChurn creates and removes containers on a running
// agent's host, 100 a minute, while sequenced UDP saturates both CPUs
// between two fixed container pairs and a busy loop swings between them.
// Each new container's end must be steered within a second: rps_cpus set,
// rps_flow_cnt 0, the guard's arrival counter on it, registered with the
// guard and recorded in the state file. Each removed one must leave
// nothing: no guard stage, journal entry or state hook of it, and at the
// end no arrival link but the fixed containers' (none on a vanished
// device). The fixed flows may not be reordered, the agent's process may
// not grow, and its disable must leave nothing.
//
// FALCON_DRILL_CHURN sets the duration (the suite runs 30 s, 50 containers;
// results/reliability-2cpu-vm/reliability-churn.md has 5 minutes), FALCON_DRILL_CHURN_RATE
// the containers a minute.
func TestDrillContainerChurn(t *testing.T) {
	needTestbed(t)
	noMemProfile(t)
	dur := envDuration(t, "FALCON_DRILL_CHURN", 30*time.Second)
	rate := envInt(t, "FALCON_DRILL_CHURN_RATE", 100)
	ctx, cancel := context.WithTimeout(context.Background(), dur+3*time.Minute)
	defer cancel()
	tb := ibed(t, "dchn", "docker", 2)
	warm(t, tb)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	o.CPUs, o.Threshold, o.Policy = []int{0, 1}, 60, datapath.PolicyPaper
	alog := newDrillLog("container followed", "device gone", "following the overlay", "overlay discovery failed")
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
	stages, err := ebpf.LoadPinnedMap(filepath.Join(a.Host().PinDir, "falcon_stages"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stages.Close()
	s0, ap0, j0, hk0 := agentHolds(a)

	load := startDrillLoad(t, tb, []trafficGroup{{"steady", 41260, seqcheck.SendOptions{Flows: 16,
		PktsPerFlow: 1 << 23, Size: 64, Pause: 20 * time.Millisecond, PauseEvery: 500}}})
	defer load.abandon()
	ch := &churn{t: t, tb: tb, a: a, stages: stages, mask: cpuset.Mask(a.Host().Opts.CPUs)}
	ch.run(ctx, dur, rate)
	s := load.stop(t)

	// Every churned container gone: the agent is back where it started.
	s1, ap1, j1, hk1 := agentHolds(a)
	if s1 != s0 || ap1 != ap0 || j1 != j0 || hk1 != hk0 {
		t.Errorf("the agent holds more than before the churn: guard stages %d (was %d), RPS applied %d (was %d), journal entries %d (was %d), state hooks %d (was %d)",
			s1, s0, ap1, ap0, j1, j0, hk1, hk0)
	}
	noChurnLeft(t, stages, s0, len(h.Containers), before.own)
	ch.report(s, alog)
	if s.reordered != 0 || s.duplicated != 0 {
		t.Errorf("%d of %d datagrams arrived out of order (%d duplicated)", s.reordered, s.received, s.duplicated)
	}
	if m := ch.mems; len(m) >= 2 {
		if grew := flat(m[0], m[len(m)-1]); len(grew) > 0 {
			t.Errorf("the agent's process grew over the churn: %s", strings.Join(grew, ", "))
		}
	}

	stages.Close() // a map held open here would count as left behind
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

// agentHolds counts what a running agent holds per container: guard
// stages, RPS settings applied, journal entries and hooks in its state.
func agentHolds(a *Agent) (stagesN, applied, journal, hooks int) {
	m := a.mode.(*falconMode)
	m.mu.Lock()
	stagesN, applied = len(m.stages), len(m.applied)
	m.mu.Unlock()
	journal = len(a.Host().journal.Entries())
	if st, err := readState(a.Host().Dir); err == nil {
		hooks = len(st.Hooks)
	}
	return
}

// noChurnLeft: the guard's stage map holds its stages devices again, and
// the kernel the fixed containers' arrival links and none on a vanished
// device, of the agent whose maps are own.
func noChurnLeft(t *testing.T, stages *ebpf.Map, want, containers int, own ownMaps) {
	t.Helper()
	var stageEntries int
	var k stageKey
	var kind uint32
	for it := stages.Iterate(); it.Next(&k, &kind); {
		stageEntries++
	}
	if stageEntries != want {
		t.Errorf("the guard's stage map holds %d devices, want %d (the VXLAN device and the fixed containers' ends)", stageEntries, want)
	}
	ko, err := listKernelObjects()
	if err != nil {
		t.Fatal(err)
	}
	ko = ko.owned(own)
	arrive, defunct := ko.countLinks("falcon_arrive"), defunctLinks(ko)
	if arrive != containers || defunct != 0 {
		t.Errorf("kernel: %d arrival links (want %d, the fixed containers'), %d links on a vanished device", arrive, containers, defunct)
	}
}

// churn adds and removes containers on host 1 of tb under the agent a and
// follows each: steered once added, pruned once removed.
type churn struct {
	t                           *testing.T
	tb                          *testbed.Testbed
	a                           *Agent
	stages                      *ebpf.Map
	mask                        string
	all, live, removing, adding []*churned
	start                       time.Time
	churnTime                   time.Duration
	mems                        []memSample
	reused                      int // new containers whose guard key a removed one had
	failed                      []string
}

// run churns for dur, rate containers a minute, keeping 3 churned ones
// alive at once, then removes them all and waits for their pruning.
func (ch *churn) run(ctx context.Context, dur time.Duration, rate int) {
	t := ch.t
	const keep = 3 // churned containers alive at once
	ch.start = time.Now()
	period := time.Minute / time.Duration(rate)
	next := ch.start
	sampleEvery := max(dur/10, time.Second)
	nextSample := ch.start.Add(sampleEvery)
	for time.Since(ch.start) < dur {
		// A pod replaced: the old one goes as the new one comes, as in a
		// rolling update.
		if len(ch.live) >= keep {
			ch.remove(ch.live[0])
		}
		ch.add(ctx)
		next = next.Add(period)
		ch.look(next)
		if time.Now().After(nextSample) {
			ch.mems = append(ch.mems, sampleMem(ch.start, len(ch.all)))
			nextSample = nextSample.Add(sampleEvery)
		}
		if ctx.Err() != nil {
			t.Fatal("out of time")
		}
	}
	ch.churnTime = time.Since(ch.start)
	for len(ch.live) > 0 {
		ch.remove(ch.live[0])
	}
	ch.look(time.Now().Add(3 * time.Second))
	for len(ch.adding)+len(ch.removing) > 0 && ctx.Err() == nil {
		ch.look(time.Now().Add(time.Second))
	}
	ch.mems = append(ch.mems, sampleMem(ch.start, len(ch.all)))
}

func (ch *churn) add(ctx context.Context) {
	c, err := testbed.AddContainer(ctx, ch.tb.Name, 1)
	if err != nil {
		ch.t.Fatal(err)
	}
	nc := &churned{c: c, added: time.Now()}
	if ino, err := netns.Inode(c.Netns); err == nil {
		for _, r := range ch.all {
			if r.key.NetnsIno == uint32(ino) {
				ch.reused++
				break
			}
		}
	}
	ch.all = append(ch.all, nc)
	ch.live = append(ch.live, nc)
	ch.adding = append(ch.adding, nc)
}

func (ch *churn) remove(c *churned) {
	if err := testbed.RemoveContainer(ch.tb.Name, 1, c.c.Name); err != nil {
		ch.t.Fatal(err)
	}
	c.removed = time.Now()
	ch.live = slices.DeleteFunc(ch.live, func(x *churned) bool { return x == c })
	// Removed before it was steered: within the bound of 1 s that is no
	// verdict (the last one added lives one period, 600 ms at 100 a
	// minute); past it, a failure look can no longer see.
	if c.steeredIn == 0 && slices.Contains(ch.adding, c) {
		ch.adding = slices.DeleteFunc(ch.adding, func(x *churned) bool { return x == c })
		if age := c.removed.Sub(c.added); age > time.Second {
			ch.failed = append(ch.failed, fmt.Sprintf("%s not steered in its %v (%s)", c.c.Netns, age.Round(time.Millisecond), c.lacked))
		}
	}
	ch.removing = append(ch.removing, c)
}

func (ch *churn) liveKeys() map[stageKey]bool {
	k := map[stageKey]bool{{}: true}
	for _, c := range ch.live {
		k[c.key] = true
	}
	return k
}

// look checks what is pending until the next action is due.
func (ch *churn) look(until time.Time) {
	for {
		for _, c := range ch.adding {
			e, err := readEnd(c.c.Netns, ch.stages, ch.a.Host().Dir)
			if err != nil {
				c.lacked = err.Error()
				continue
			}
			c.key = e.key
			if c.lacked = e.lacks(ch.mask); c.lacked == "" {
				c.steeredIn = time.Since(c.added)
			}
		}
		ch.adding = slices.DeleteFunc(ch.adding, func(c *churned) bool {
			if c.steeredIn == 0 && time.Since(c.added) > 10*time.Second {
				ch.failed = append(ch.failed, fmt.Sprintf("%s never steered (%s)", c.c.Netns, c.lacked))
				return true
			}
			return c.steeredIn > 0
		})
		lk := ch.liveKeys()
		for _, c := range ch.removing {
			if c.left = remnants(ch.a, c, ch.stages, lk); c.left == "" {
				c.prunedIn = time.Since(c.removed)
			} else if c.leftAt1s == "" && time.Since(c.removed) > time.Second {
				c.leftAt1s = c.left
			}
		}
		ch.removing = slices.DeleteFunc(ch.removing, func(c *churned) bool {
			if c.prunedIn == 0 && time.Since(c.removed) > 10*time.Second {
				ch.failed = append(ch.failed, fmt.Sprintf("%s never pruned: %s", c.c.Netns, c.left))
				return true
			}
			return c.prunedIn > 0
		})
		if !time.Now().Before(until) {
			return
		}
		time.Sleep(min(10*time.Millisecond, time.Until(until)))
	}
}

// report logs the churn's figures and fails for each container steered
// late or never, or never pruned.
func (ch *churn) report(s seqTotals, alog *drillLog) {
	t := ch.t
	var steerT, pruneT []time.Duration
	late := 0
	for _, c := range ch.all {
		if c.steeredIn > 0 {
			steerT = append(steerT, c.steeredIn)
			if c.steeredIn > time.Second {
				late++
				ch.failed = append(ch.failed, fmt.Sprintf("%s steered only after %v", c.c.Netns, c.steeredIn.Round(time.Millisecond)))
			}
		}
		if c.prunedIn > 0 {
			pruneT = append(pruneT, c.prunedIn)
			if c.prunedIn > time.Second {
				t.Logf("%s (guard key %+v) pruned only after %v (%s left after 1 s)", c.c.Netns, c.key, c.prunedIn.Round(time.Millisecond), c.leftAt1s)
			}
		}
	}
	t.Logf("%d containers added and removed in %v (%.0f a minute) under %d flows; %d got a guard key a removed container had had",
		len(ch.all), ch.churnTime.Round(time.Second), float64(len(ch.all))/ch.churnTime.Minutes(), s.flows, ch.reused)
	t.Logf("steered after: median %v, p99 %v, longest %v; %d later than 1 s", quantile(steerT, 0.5).Round(time.Millisecond),
		quantile(steerT, 0.99).Round(time.Millisecond), quantile(steerT, 1).Round(time.Millisecond), late)
	t.Logf("pruned after: median %v, p99 %v, longest %v", quantile(pruneT, 0.5).Round(time.Millisecond),
		quantile(pruneT, 0.99).Round(time.Millisecond), quantile(pruneT, 1).Round(time.Millisecond))
	t.Logf("traffic: %d datagrams received, %d reordered, %d duplicated", s.received, s.reordered, s.duplicated)
	t.Logf("agent log: %d containers followed, %d devices no longer followed, %d warnings while following",
		alog.count("container followed"), alog.count("device gone"), alog.count("following the overlay")+alog.count("overlay discovery failed"))
	for _, mm := range ch.mems {
		t.Logf("memory: %s (the cycle is the containers added so far)", mm)
	}
	for _, f := range ch.failed {
		t.Error(f)
	}
}

// defunctLinks counts o's tcx links whose device is gone (ifindex 0): an
// agent that closes no link of a vanished container holds these.
func defunctLinks(o kernelObjects) int {
	n := 0
	for id := range o.links {
		l, err := link.NewFromID(id)
		if err != nil {
			continue
		}
		info, err := l.Info()
		l.Close()
		if err == nil && info.TCX() != nil && info.TCX().Ifindex == 0 {
			n++
		}
	}
	return n
}
