// Package metrics exposes a falcon agent's state to Prometheus: the BPF
// counters and load that falcon status reads, read again at each scrape,
// and what the agent process did that no map records.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// def is one metric. The table is the one list of what the collector
// exposes: docs/METRICS.md and the Grafana dashboard are tested against it.
type def struct {
	name   string
	kind   prometheus.ValueType
	labels []string
	help   string
}

var hookLabels = []string{"hook", "netns", "role"}

// Names are stable: dashboards and alerts are written against them.
var defs = []def{
	{"falcon_build_info", prometheus.GaugeValue, []string{"version", "goversion"}, "Always 1; the labels say which falcon serves the metrics."},
	{"falcon_enabled", prometheus.GaugeValue, []string{"mode"}, "1 while falcon is enabled in the agent's network namespace."},
	{"falcon_ready", prometheus.GaugeValue, nil, "1 while the agent runs, its hooks are attached and its load data is fresh (falcon status --ready)."},
	{"falcon_steering", prometheus.GaugeValue, nil, "1 while the datapath may move stages to other CPUs; 0 while falcon stepped aside (adaptive policy, steering measured not to pay)."},
	{"falcon_stood_down", prometheus.GaugeValue, nil, "1 while falcon is off the path: no CPU busy, or steering measured not to pay; every program detached and RPS restored until a CPU is busy (adaptive policy)."},
	{"falcon_threshold_ratio", prometheus.GaugeValue, nil, "The load threshold: a CPU at or above it takes no new flows."},
	{"falcon_cpu_load_ratio", prometheus.GaugeValue, []string{"cpu", "in_set"}, "Each CPU's load as the datapath decides with it (EWMA of busy time, 0..1); in_set says whether the CPU may run stages."},
	{"falcon_load_average_ratio", prometheus.GaugeValue, nil, "Average load over the CPU set; at or above the threshold every stage stays inline."},
	{"falcon_load_age_seconds", prometheus.GaugeValue, nil, "Age of the load data the datapath decides with."},
	{"falcon_load_stale", prometheus.GaugeValue, nil, "1 while the load data is too old: steering is off."},
	{"falcon_agent_load_samples_total", prometheus.CounterValue, nil, "Load samples the agent published to the datapath."},
	{"falcon_agent_stale_intervals_total", prometheus.CounterValue, nil, "Gaps between load samples long enough that the datapath saw stale load and steered nothing."},
	{"falcon_agent_containers", prometheus.GaugeValue, nil, "Container ends the agent follows."},
	{"falcon_agent_on_path_seconds_total", prometheus.CounterValue, nil, "Seconds falcon's programs were on the path (not stood down) since the agent started."},
	{"falcon_agent_engaged_seconds_total", prometheus.CounterValue, nil, "Seconds on the path with steering engaged (adaptive: the engagement test found it pays; the paper policy always)."},
	{"falcon_agent_comebacks_total", prometheus.CounterValue, nil, "Times falcon came back on the path after standing down (the engagement test's own switches included)."},
	{"falcon_agent_stand_downs_total", prometheus.CounterValue, nil, "Times falcon took itself off the path (the engagement test's own switches included)."},
	{"falcon_agent_engagement_tests_total", prometheus.CounterValue, []string{"verdict"}, "Engagement tests by verdict: steer (the containers received more with steering) or off (they did not; falcon stands down)."},
	{"falcon_cause_turns_total", prometheus.CounterValue, []string{"verdict"}, "Turns of the adaptive policy's decision by cause (about every 150 ms), by verdict: engage (the bottleneck CPU saturated or dropping, and a CPU of the set free of it, the applications and the NIC), inline (not), unreadable (the causes could not be read: the engagement test decides by A/B)."},
	{"falcon_cause_engagements_total", prometheus.CounterValue, []string{"outcome"}, "Engagements decided by cause, by outcome: begun, pays (the bottleneck's busy time per delivered packet fell and nothing was lost), fails (it did not: falcon stood down)."},
	{"falcon_cause_bottleneck_cpu", prometheus.GaugeValue, nil, "The CPU the latest turn found busiest with packet work (softirq), -1 for none."},
	{"falcon_cause_target_cpus", prometheus.GaugeValue, nil, "CPUs of the set the latest turn found a stage could move to: neither the bottleneck, nor an application's, nor the NIC's, and with room."},
	{"falcon_cause_cost_ratio", prometheus.GaugeValue, nil, "The latest confirmation's bottleneck busy time per delivered packet, engaged over stood down (below 1: steering relieves it)."},
	{"falcon_stage_packets_total", prometheus.CounterValue, append(hookLabels, "cpu"), "Packets a hook saw, by the CPU they were on: where the stage the hook sees ran."},
	{"falcon_steered_packets_total", prometheus.CounterValue, append(hookLabels, "cpu"), "Packets a hook decided on, by the CPU it gave their next stage: the CPU it steered them to, or the one they were on when kept inline."},
	{"falcon_decisions_total", prometheus.CounterValue, append(hookLabels, "cpu", "decision"), "A hook's fresh decisions, by the CPU it ran on when it decided: first (the first hash choice), second (the second), fallback (the next stage stays inline)."},
	{"falcon_fallbacks_total", prometheus.CounterValue, append(hookLabels, "cpu", "reason"), "Fallback decisions, by the CPU the hook ran on and by reason: load (the set is busy), stale (old load data), not_paying (adaptive: moving would not pay)."},
	{"falcon_kept_decisions_total", prometheus.CounterValue, append(hookLabels, "cpu"), "Packets that kept their flow's earlier decision, by the CPU the hook ran on."},
	{"falcon_guard_holds_total", prometheus.CounterValue, append(hookLabels, "cpu"), "Packets the ordering guard kept on their flow's old CPU because earlier ones were still queued, by the CPU the hook ran on."},
	{"falcon_guard_moves_total", prometheus.CounterValue, append(hookLabels, "cpu"), "Times a flow changed CPU at a hook under the ordering guard, by the CPU the hook ran on when it moved the flow."},
	{"falcon_guard_timeouts_total", prometheus.CounterValue, append(hookLabels, "cpu"), "Moves made after the guard stopped waiting for packets lost on the way (part of falcon_guard_moves_total), by the CPU the hook ran on."},
	{"falcon_passed_packets_total", prometheus.CounterValue, append(hookLabels, "reason"), "Packets a hook passed untouched (not an overlay flow it steers), by reason."},
	{"falcon_split_queued_frames_total", prometheus.CounterValue, []string{"cpu"}, "--split: frames the XDP program queued to a CPU's cpumap."},
	{"falcon_split_queue_drops_total", prometheus.CounterValue, []string{"cpu"}, "--split: frames dropped at a CPU's full cpumap queue."},
	{"falcon_split_queue_full_drops_total", prometheus.CounterValue, []string{"cpu"}, "--split: frames the split program dropped because a CPU's cpumap queue might have been full (each counted by the ordering guard)."},
	{"falcon_split_built_total", prometheus.CounterValue, []string{"cpu"}, "--split: frames a CPU's cpumap kthread turned into skbs."},
	{"falcon_split_redirect_failures_total", prometheus.CounterValue, []string{"cpu"}, "--split: redirects that found no cpumap entry (built on the interrupt CPU)."},
	{"falcon_micro_flows_total", prometheus.CounterValue, nil, "mode mflow: micro-flows the split program started (batches of an elephant's packets sent to one split CPU)."},
	{"falcon_micro_flow_packets_total", prometheus.CounterValue, nil, "mode mflow: elephants' packets the split program sent in micro-flows, unguarded (TCP reorders them back)."},
	{"falcon_fastpath_entries", prometheus.GaugeValue, []string{"direction"}, "Fast path: cached flows usable now, by direction (ingress: delivered into a container; egress: encapsulated to the wire)."},
	{"falcon_fastpath_packets_total", prometheus.CounterValue, []string{"direction", "outcome"}, "Fast path: packets by direction and outcome: hit (carried by the fast path), miss (no entry: the slow path), learned (an entry taught by a slow packet)."},
	{"falcon_fastpath_slow_path_packets_total", prometheus.CounterValue, []string{"reason"}, "Fast path: packets of cached or cacheable flows left to the slow path, by reason (guard_wait, stale, spoofed, changed_by_slow_path, tcp_control, not_eligible, helper_failed, conntrack_wait, idle, over_share_pending, over_share_entry, csum_aggregate)."},
	{"falcon_fastpath_invalidations_total", prometheus.CounterValue, nil, "Fast path: times every entry was invalidated (a rule, route, neighbour, link or container changed)."},
	{"falcon_fastpath_sender_moved_total", prometheus.CounterValue, nil, "Fast path, sender-rps: packets a container sent on another CPU than their flow's home, queued on the home's backlog so the flow leaves in order."},
}

// Names lists the metrics the collector can expose.
func Names() []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.name
	}
	return out
}
