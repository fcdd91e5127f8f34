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
	Engage     bool  `json:"engage"`
	// Readable is false where the causes could not be read: no ruling.
	Readable bool   `json:"readable"`
	Why      string `json:"why"`
}

// minSoftirq: a CPU spending less of a window in softirqs is not where the
// packets' work is, however busy (a sender, a compiler).
const minSoftirq = 10

// Decide rules on one window: engage only while the bottleneck CPU is
// saturated or dropping and some CPU of the set is neither the bottleneck,
// nor an application's, nor the NIC's, and has room (below the threshold).
func Decide(w Window, p Params) Verdict {
	v := Verdict{Bottleneck: -1, Targets: []int{}}
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
	for _, c := range p.Set {
		b, seen := busy[c]
		if seen && b < p.Threshold && c != bn.ID && !slices.Contains(w.AppCPUs, c) && !slices.Contains(w.NICCPUs, c) {
			v.Targets = append(v.Targets, c)
		}
	}
	v.Engage = (v.Saturated || v.Dropping) && len(v.Targets) > 0
	v.Why = explain(v, w, bn)
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

func explain(v Verdict, w Window, bn *CPU) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bottleneck CPU %d %.0f %% busy (%.0f %% softirq, %d dropped, %d squeezed)",
		bn.ID, bn.Busy, bn.Softirq, bn.Dropped, bn.Squeezed)
	fmt.Fprintf(&b, "; applications on %v, NIC on %v", w.AppCPUs, w.NICCPUs)
	switch {
	case !v.Saturated && !v.Dropping:
		b.WriteString(": not saturated, nothing to relieve")
	case len(v.Targets) == 0:
		b.WriteString(": no CPU of the set is free of the bottleneck, the applications and the NIC with room; stay inline")
	default:
		fmt.Fprintf(&b, ": engage, stages may move to %v", v.Targets)
	}
	return b.String()
}
