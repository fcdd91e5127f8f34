package metrics

import (
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
)

// Collector reads the agent's state through the same reader as falcon
// status, so a scrape and falcon status never disagree about a counter.
// Scrapes share one read per SnapshotTTL: a read visits every BPF map, and
// however often and however many scrapers ask, the agent pays for at most
// one a second.
type Collector struct {
	version string
	status  func() (*agent.Report, error)
	agent   atomic.Pointer[agent.Agent]
	descs   map[string]metric

	mu   sync.Mutex // held while reading: concurrent scrapes wait for one read
	at   time.Time
	last *agent.Report
	err  error
}

// SnapshotTTL is how long a status read serves scrapes; Prometheus scrapes
// every 15 s or more, so only a burst of scrapes ever shares one.
const SnapshotTTL = time.Second

type metric struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

// New collects for the agent of o's namespace; version is the binary's.
func New(o agent.Options, version string) *Collector {
	return newCollector(version, func() (*agent.Report, error) { return agent.Status(o) })
}

func newCollector(version string, status func() (*agent.Report, error)) *Collector {
	c := &Collector{version: version, status: status, descs: map[string]metric{}}
	for _, d := range defs {
		c.descs[d.name] = metric{prometheus.NewDesc(d.name, d.help, d.labels, nil), d.kind}
	}
	return c
}

// Attach hands the collector the running agent, whose activity (samples,
// stale intervals, containers) lives in its memory only. Until then those
// metrics are absent.
func (c *Collector) Attach(a *agent.Agent) { c.agent.Store(a) }

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.descs {
		ch <- m.desc
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{c: c, ch: ch}
	e.emit("falcon_build_info", 1, c.version, runtime.Version())
	if a := c.agent.Load(); a != nil {
		act := a.Activity()
		e.emit("falcon_agent_load_samples_total", float64(act.Samples))
		e.emit("falcon_agent_stale_intervals_total", float64(act.StaleIntervals))
		e.emit("falcon_agent_containers", float64(act.Containers))
		if sp := act.Spent; sp.Loaded > 0 { // falcon's own datapath
			e.emit("falcon_agent_on_path_seconds_total", sp.OnPath.Seconds())
			e.emit("falcon_agent_engaged_seconds_total", sp.Engaged.Seconds())
			e.emit("falcon_agent_comebacks_total", float64(sp.Comebacks))
			e.emit("falcon_agent_stand_downs_total", float64(sp.StandDowns))
			e.emit("falcon_agent_engagement_tests_total", float64(act.ForSteering), "steer")
			e.emit("falcon_agent_engagement_tests_total", float64(act.Tests-act.ForSteering), "off")
			e.causes(act.Causes)
		}
	}
	r, err := c.snapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.descs["falcon_enabled"].desc, err)
		return
	}
	e.report(r)
}

// snapshot is the agent's status as read at most SnapshotTTL ago.
func (c *Collector) snapshot() (*agent.Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= SnapshotTTL {
		c.last, c.err = c.status()
		c.at = time.Now()
	}
	return c.last, c.err
}

// causes: the decision by cause's turns, and the latest one's figures.
func (e emitter) causes(c agent.CauseCounts) {
	e.emit("falcon_cause_turns_total", float64(c.Engage), "engage")
	e.emit("falcon_cause_turns_total", float64(c.Inline), "inline")
	e.emit("falcon_cause_turns_total", float64(c.Unreadable), "unreadable")
	e.emit("falcon_cause_engagements_total", float64(c.Begun), "begun")
	e.emit("falcon_cause_engagements_total", float64(c.Pays), "pays")
	e.emit("falcon_cause_engagements_total", float64(c.Fails), "fails")
	if c.Last.Seq == 0 {
		return
	}
	v := c.Last.Step.Verdict
	e.emit("falcon_cause_bottleneck_cpu", float64(v.Bottleneck))
	e.emit("falcon_cause_target_cpus", float64(len(v.Targets)))
	if k := c.Last.Step.Confirm; k != nil && k.BaseCost > 0 {
		e.emit("falcon_cause_cost_ratio", k.Cost/k.BaseCost)
	}
}

// emitter writes one scrape's metrics.
type emitter struct {
	c  *Collector
	ch chan<- prometheus.Metric
}

func (e emitter) emit(name string, v float64, labels ...string) {
	m := e.c.descs[name]
	e.ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (e emitter) report(r *agent.Report) {
	e.emit("falcon_enabled", b2f(r.Enabled), r.Mode)
	e.emit("falcon_ready", b2f(r.Ready))
	if r.Load == nil { // a static mode, or no agent: no datapath to read
		return
	}
	e.emit("falcon_steering", b2f(r.Steering))
	e.emit("falcon_stood_down", b2f(r.StoodDown))
	e.emit("falcon_threshold_ratio", float64(r.Threshold)/100)
	set, _ := cpuset.Parse(r.CPUs)
	for cpu, pct := range r.Load.PerCPU {
		e.emit("falcon_cpu_load_ratio", float64(pct)/100, strconv.Itoa(cpu), strconv.FormatBool(slices.Contains(set, cpu)))
	}
	e.emit("falcon_load_average_ratio", float64(r.Load.Avg)/100)
	e.emit("falcon_load_age_seconds", r.Load.AgeMs/1000)
	e.emit("falcon_load_stale", b2f(r.Load.Stale))
	for _, s := range r.Stages {
		hook := []string{s.Device, netnsLabel(s.Netns), string(s.Role)}
		with := func(l ...string) []string { return append(slices.Clone(hook), l...) }
		for cpu, n := range s.RanOn {
			e.emit("falcon_stage_packets_total", float64(n), with(strconv.Itoa(cpu))...)
		}
		for cpu, n := range s.SteeredTo {
			e.emit("falcon_steered_packets_total", float64(n), with(strconv.Itoa(cpu))...)
		}
		for cpu, d := range s.DecisionsPerCPU {
			c := strconv.Itoa(cpu)
			e.emit("falcon_decisions_total", float64(d.First), with(c, "first")...)
			e.emit("falcon_decisions_total", float64(d.Second), with(c, "second")...)
			e.emit("falcon_decisions_total", float64(d.Fallback), with(c, "fallback")...)
			e.emit("falcon_fallbacks_total", float64(d.Fallback-d.FallbackStale-d.FallbackIdle), with(c, "load")...)
			e.emit("falcon_fallbacks_total", float64(d.FallbackStale), with(c, "stale")...)
			e.emit("falcon_fallbacks_total", float64(d.FallbackIdle), with(c, "not_paying")...)
			e.emit("falcon_kept_decisions_total", float64(d.FlowletHits), with(c)...)
			e.emit("falcon_guard_holds_total", float64(d.GuardHolds), with(c)...)
			e.emit("falcon_guard_moves_total", float64(d.Moved), with(c)...)
			e.emit("falcon_guard_timeouts_total", float64(d.GuardTimeouts), with(c)...)
		}
		for reason, n := range s.Decisions.Passed {
			e.emit("falcon_passed_packets_total", float64(n), with(reason)...)
		}
	}
	if r.Split != nil {
		for cpu, st := range r.Split.PerCPU {
			c := strconv.Itoa(cpu)
			e.emit("falcon_split_queued_frames_total", float64(st.Enqueued), c)
			e.emit("falcon_split_queue_drops_total", float64(st.EnqueueDrops), c)
			e.emit("falcon_split_queue_full_drops_total", float64(st.QueueFull), c)
			e.emit("falcon_split_built_total", float64(st.Built), c)
			e.emit("falcon_split_redirect_failures_total", float64(st.RedirectFail), c)
		}
		if m := r.Split.Micro; m != nil {
			e.emit("falcon_micro_flows_total", float64(m.Started))
			e.emit("falcon_micro_flow_packets_total", float64(m.SplitPackets))
		}
	}
	e.fastPath(r.FastPath)
}

func (e emitter) fastPath(f *agent.FastReport) {
	if f == nil {
		return
	}
	c := f.Counters
	e.emit("falcon_fastpath_entries", float64(f.IngressEntries), "ingress")
	e.emit("falcon_fastpath_entries", float64(f.EgressEntries), "egress")
	for _, dir := range []string{"ingress", "egress"} {
		e.emit("falcon_fastpath_packets_total", float64(c[dir+"_hit"]), dir, "hit")
		e.emit("falcon_fastpath_packets_total", float64(c[dir+"_miss"]), dir, "miss")
		e.emit("falcon_fastpath_packets_total", float64(c[dir+"_learned"]), dir, "learned")
	}
	for _, reason := range datapath.FastSlowReasons() {
		e.emit("falcon_fastpath_slow_path_packets_total", float64(c[reason]), reason)
	}
	e.emit("falcon_fastpath_invalidations_total", float64(f.Invalidations))
	e.emit("falcon_fastpath_sender_moved_total", float64(c["send_moved"]))
}

// procNetns matches the namespace paths discovery takes from a process:
// /proc/PID/ns/net.
var procNetns = regexp.MustCompile(`^/proc/[0-9]+/ns/net$`)

// netnsLabel names a hook's namespace in a label without a PID: a PID says
// which of a pod's processes discovery happened to find, changes when the
// pod restarts one, and tells whoever reads the metrics which processes run
// where. Such a namespace is named by its inode, as ls -l
// /proc/PID/ns/net shows it: net:[INODE].
func netnsLabel(ns string) string {
	if !procNetns.MatchString(ns) {
		return ns
	}
	ino, err := netns.Inode(ns)
	if err != nil {
		return "net:[gone]"
	}
	return "net:[" + strconv.FormatUint(ino, 10) + "]"
}
