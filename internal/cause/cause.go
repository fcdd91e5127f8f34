// Package cause decides whether moving a packet-processing stage to another
// CPU can pay, from what the kernel says directly rather than from a
// throughput A/B: which CPU the packet work saturates (softirq time,
// backlog drops, NAPI squeezes), which CPUs run the receiving
// applications, which CPU runs the NIC's stage, and which CPUs idle. A hop
// pays only where it takes work off a saturated CPU and puts it on one that
// is neither that CPU, nor an application's (the stage would compete with
// the reader it feeds), nor the NIC's (which is the bottleneck's sibling:
// its next packets arrive there). Decide and Confirm are pure functions
// over recorded windows, so a run on a machine we do not have can be
// replayed offline (Trace).
package cause

import (
	"fmt"
	"slices"
	"strings"
)

// CPU is one CPU over a window.
type CPU struct {
	ID int `json:"cpu"`
	// Busy and Softirq are percent of the window (busy = 100 − idle −
	// iowait, as the load); BusyTicks is busy time in USER_HZ ticks, the
	// numerator of Confirm's cost per packet.
	Busy      float64 `json:"busy_pct"`
	Softirq   float64 `json:"softirq_pct"`
	BusyTicks uint64  `json:"busy_ticks"`
	NetRx     uint64  `json:"net_rx"`   // NET_RX softirqs run (/proc/softirqs)
	Dropped   uint64  `json:"dropped"`  // backlog full (softnet_stat)
	Squeezed  uint64  `json:"squeezed"` // net_rx_action out of budget (softnet_stat)
}

// Window is what one reading saw since the one before.
type Window struct {
	Ms   float64 `json:"ms"` // the window's length
	CPUs []CPU   `json:"cpus"`
	// AppCPUs run the tasks that hold the containers' sockets (each such
	// task that ran in the window: the CPU it last ran on); NICCPUs ran the
	// NIC's stage (the datapath's NIC hook counters while on the path, else
	// the CPUs with a fair share of NET_RX softirqs).
	AppCPUs []int `json:"app_cpus"`
	NICCPUs []int `json:"nic_cpus"`
	// Listed: the receivers' sockets were listed at this reading (at most
	// every 2 s, and at once when traffic begins); NewSockets: that listing
	// found a socket the one before did not have, a new flow. Until a
	// listing after a flow began, AppCPUs may lack its receiver.
	Listed     bool `json:"listed,omitempty"`
	NewSockets bool `json:"new_sockets,omitempty"`
	// Delivered: what the containers' sockets received (UDP datagrams and
	// TCP bytes in 1448-byte segments); SockDrops: UDP receive buffer
	// errors in their namespaces.
	Delivered uint64 `json:"delivered"`
	SockDrops uint64 `json:"sock_drops"`
	// Engaged: falcon steered during the window.
	Engaged bool `json:"engaged"`
	// Unreadable says why a cause could not be read ("" = all read):
	// Decide cannot rule then, and the agent falls back on the A/B test.
	Unreadable string `json:"unreadable,omitempty"`
}

// Params are the policy's settings.
type Params struct {
	Threshold float64 `json:"threshold"` // busy percent at which a CPU is saturated
	Set       []int   `json:"set"`       // CPUs a stage may move to (the set and the split set)
}

// Verdict is Decide's ruling and its reasons.
type Verdict struct {
	Bottleneck int   `json:"bottleneck"` // the busiest CPU of packet work; -1: none
	Saturated  bool  `json:"saturated"`  // its busy time at or above the threshold
	Dropping   bool  `json:"dropping"`   // it dropped or ran out of NAPI budget
	Targets    []int `json:"targets"`    // CPUs of the set a stage may move to
	// AppKnown: the receivers' CPUs were known (Machine: for appKnownMs
	// since a listing of the flow's sockets); unknown, a receiver may run
	// on any CPU of the set, and none is a target.
	AppKnown bool `json:"app_known"`
	Engage   bool `json:"engage"`
	// Readable is false where the causes could not be read: no ruling.
	Readable bool   `json:"readable"`
	Why      string `json:"why"`
}

// minSoftirq: a CPU spending less of a window in softirqs is not where the
// packets' work is, however busy (a sender, a compiler).
const minSoftirq = 10

// MinSet is the fewest CPUs a set must have for a hop ever to pay: the
// bottleneck's (the NIC's, where the receive work starts), the receiving
// application's, and one free of both. The application may run on any
// CPU, the NIC's too, but a set that holds a free CPU only where the
// application shares the NIC's is one the scheduler can take away at any
// moment: on 2 vCPUs every engagement measured cost (one UDP flow: 0.55 x
// vanilla over new flows; ping-pong p99 1.67 x).
const MinSet = 3

// Roomless says why a set can never hold a target ("" where it can):
// with it, falcon never goes on the path.
func Roomless(set []int) string {
	if len(set) >= MinSet {
		return ""
	}
	return fmt.Sprintf("the CPU set %v has %d CPUs, and a hop needs %d: the bottleneck's and the NIC's, the application's, and a free one",
		set, len(set), MinSet)
}

// Traffic: whether a window delivered enough to rule on (and, after one
// that did not, whether a flow began).
func Traffic(w Window) bool { return w.Delivered >= minDelivered }

// Decide rules on one window: engage only while the bottleneck CPU is
// saturated or dropping and some CPU of the set is neither the bottleneck,
// nor an application's, nor the NIC's, and has room (below the threshold).
// A window that names no application's CPU is ruled as if one ran on every
// CPU of the set (Machine also requires them known for appKnownMs).
func Decide(w Window, p Params) Verdict { return decide(w, p, len(w.AppCPUs) > 0) }

func decide(w Window, p Params, appKnown bool) Verdict {
	v := Verdict{Bottleneck: -1, Targets: []int{}, AppKnown: appKnown}
	if w.Unreadable != "" {
		v.Why = "causes unreadable: " + w.Unreadable
		return v
	}
	v.Readable = true
	if w.Delivered < minDelivered {
		// Nothing received to speak of: no flow to relieve (a receiver
		// that did not run in the window would also pass for idle).
		v.Why = fmt.Sprintf("%d packets received: no traffic to relieve", w.Delivered)
		return v
	}
	bn := bottleneck(w)
	if bn == nil {
		v.Why = "no CPU does packet work (softirq under 10 %)"
		return v
	}
	v.Bottleneck = bn.ID
	v.Saturated = bn.Busy >= p.Threshold
	v.Dropping = bn.Dropped+bn.Squeezed > 0
	busy := map[int]float64{}
	for _, c := range w.CPUs {
		busy[c.ID] = c.Busy
	}
	// Unknown receivers, or a set too small: no CPU is certainly free.
	canFree := appKnown && Roomless(p.Set) == ""
	for _, c := range p.Set {
		b, seen := busy[c]
		if canFree && seen && b < p.Threshold && c != bn.ID && !slices.Contains(w.AppCPUs, c) && !slices.Contains(w.NICCPUs, c) {
			v.Targets = append(v.Targets, c)
		}
	}
	v.Engage = (v.Saturated || v.Dropping) && len(v.Targets) > 0
	v.Why = explain(v, w, bn, p)
	return v
}

// bottleneck is where the flows' receive work starts and, with falcon
// off the path, all of it runs: the busiest NIC CPU with packet work;
// with none, the busiest CPU with packet work. A sender's CPU may carry
// softirq time too (a veth's receive, TCP's ACKs) and be busier, but
// relieving it is not what a stage moved off the NIC's CPU does.
func bottleneck(w Window) *CPU {
	var bn, nic *CPU
	for i := range w.CPUs {
		c := &w.CPUs[i]
		if c.Softirq < minSoftirq && c.Dropped+c.Squeezed == 0 {
			continue
		}
		if bn == nil || c.Busy > bn.Busy {
			bn = c
		}
		if slices.Contains(w.NICCPUs, c.ID) && (nic == nil || c.Busy > nic.Busy) {
			nic = c
		}
	}
	if nic != nil {
		return nic
	}
	return bn
}

func explain(v Verdict, w Window, bn *CPU, p Params) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bottleneck CPU %d %.0f %% busy (%.0f %% softirq, %d dropped, %d squeezed)",
		bn.ID, bn.Busy, bn.Softirq, bn.Dropped, bn.Squeezed)
	apps := "unknown, any CPU of the set"
	if v.AppKnown {
		apps = fmt.Sprint(w.AppCPUs)
	} else if len(w.AppCPUs) > 0 {
		apps = fmt.Sprintf("%v, not yet known long enough: any CPU of the set", w.AppCPUs)
	}
	fmt.Fprintf(&b, "; applications on %s, NIC on %v", apps, w.NICCPUs)
	switch r := Roomless(p.Set); {
	case r != "":
		b.WriteString(": " + r + "; never engage")
	case !v.Saturated && !v.Dropping:
		b.WriteString(": not saturated, nothing to relieve")
	case len(v.Targets) == 0:
		b.WriteString(": no CPU of the set is free of the bottleneck, the applications and the NIC with room; stay inline")
	default:
		fmt.Fprintf(&b, ": engage, stages may move to %v", v.Targets)
	}
	return b.String()
}
