// Package sim is a discrete-event model of a receiving host's overlay
// path: per packet the NIC, VXLAN and container stages and the receiving
// application, per-CPU softirq queues and threads, the cost of handing a
// packet to another CPU, and the agent's load sampling, on any number of
// cores. It runs the project's own policy code (internal/steer: both
// policies and the ordering guard) so that what it predicts for falcon is
// what the datapath would decide. Its costs come from a calibration
// measured on a real machine (falcon-lab bench --calibrate); what it prints is
// a prediction and is labelled simulated.
package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Costs is what one packet of one size costs, in CPU nanoseconds, at each
// part of the path. Measured by the calibration, never assumed.
type Costs struct {
	Size int `json:"size"` // UDP payload bytes
	// Send is the sending application's cost per datagram, down to the
	// wire (its syscall, both overlay namespaces' transmit path).
	Send float64 `json:"send_ns"`
	// Build is the NIC stage's part before the packet is handed to the
	// protocol stack (the wire's NAPI poll: skb building and GRO), which
	// stays on the interrupt CPU under RPS; NIC is the rest of the NIC
	// stage (IP, UDP, VXLAN decapsulation) up to the VXLAN device.
	Build float64 `json:"build_ns"`
	NIC   float64 `json:"nic_ns"`
	// VXLAN is the VXLAN device's stage (inner GRO, bridge, veth transmit);
	// Container the container's eth0 stage (IP, UDP, socket queue).
	VXLAN     float64 `json:"vxlan_ns"`
	Container float64 `json:"container_ns"`
	// ContainerDrop is the container stage of a datagram its socket has
	// no room for: freed, no application woken.
	ContainerDrop float64 `json:"container_drop_ns"`
	// App is the receiving application's cost per datagram when it waits
	// for each (sleeps and is woken); AppBusy when its socket always holds
	// the next one.
	App     float64 `json:"app_ns"`
	AppBusy float64 `json:"app_busy_ns"`
	// HandoffTx and HandoffRx are what a packet's stage costs more when its
	// previous stage ran on another CPU: on the CPU that hands it over and
	// on the one that takes it (cold caches, the IPI).
	HandoffTx float64 `json:"handoff_tx_ns"`
	HandoffRx float64 `json:"handoff_rx_ns"`
	// Hook is one falcon tc program run; XDP the split's program and
	// redirect on the interrupt CPU.
	Hook float64 `json:"hook_ns"`
	XDP  float64 `json:"xdp_ns"`
	// SoftShare is the share of a CPU the softirq takes once ksoftirqd
	// runs it against a busy application thread (0..1).
	SoftShare float64 `json:"soft_share"`
}

func (c Costs) check() error {
	for _, v := range []struct {
		name string
		x    float64
	}{{"send", c.Send}, {"build", c.Build}, {"nic", c.NIC}, {"vxlan", c.VXLAN}, {"container", c.Container}, {"container_drop", c.ContainerDrop},
		{"app", c.App}, {"app_busy", c.AppBusy}, {"handoff_tx", c.HandoffTx}, {"handoff_rx", c.HandoffRx}, {"hook", c.Hook}, {"xdp", c.XDP}} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) || v.x < 0 || v.x > 1e7 {
			return fmt.Errorf("size %d: %s cost %v ns: want 0..10 ms", c.Size, v.name, v.x)
		}
	}
	if !(c.SoftShare > 0 && c.SoftShare < 1) {
		return fmt.Errorf("size %d: softirq share %v: want between 0 and 1", c.Size, c.SoftShare)
	}
	if c.Size < 1 {
		return fmt.Errorf("size %d: want a payload of at least 1 byte", c.Size)
	}
	if c.Build+c.NIC+c.VXLAN+c.Container+c.App <= 0 {
		return fmt.Errorf("size %d: every stage costs 0", c.Size)
	}
	return nil
}

// CostTable is the costs measured at several sizes.
type CostTable []Costs

// At returns the costs at size, interpolated linearly between the two
// nearest measured sizes and held at the ends.
func (t CostTable) At(size int) Costs {
	if len(t) == 0 {
		return Costs{Size: size}
	}
	s := sortedTable(t)
	i := sort.Search(len(s), func(i int) bool { return s[i].Size >= size })
	switch {
	case i == 0:
		c := s[0]
		c.Size = size
		return c
	case i == len(s):
		c := s[len(s)-1]
		c.Size = size
		return c
	case s[i].Size == size:
		return s[i]
	}
	a, b := s[i-1], s[i]
	f := float64(size-a.Size) / float64(b.Size-a.Size)
	l := func(x, y float64) float64 { return x + f*(y-x) }
	return Costs{Size: size, Send: l(a.Send, b.Send), Build: l(a.Build, b.Build), NIC: l(a.NIC, b.NIC),
		VXLAN: l(a.VXLAN, b.VXLAN), Container: l(a.Container, b.Container), ContainerDrop: l(a.ContainerDrop, b.ContainerDrop), App: l(a.App, b.App), AppBusy: l(a.AppBusy, b.AppBusy),
		HandoffTx: l(a.HandoffTx, b.HandoffTx), HandoffRx: l(a.HandoffRx, b.HandoffRx),
		Hook: l(a.Hook, b.Hook), XDP: l(a.XDP, b.XDP), SoftShare: l(a.SoftShare, b.SoftShare)}
}

func sortedTable(t CostTable) CostTable {
	s := append(CostTable(nil), t...)
	sort.Slice(s, func(i, j int) bool { return s[i].Size < s[j].Size })
	return s
}

// Check validates every row and rejects two rows of one size.
func (t CostTable) Check() error {
	if len(t) == 0 {
		return fmt.Errorf("no costs")
	}
	seen := map[int]bool{}
	for _, c := range t {
		if err := c.check(); err != nil {
			return err
		}
		if seen[c.Size] {
			return fmt.Errorf("size %d measured twice", c.Size)
		}
		seen[c.Size] = true
	}
	return nil
}

// Text is the table as people read it, one size a line.
func (t CostTable) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "calibrated costs, ns per datagram: %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %5s %5s %5s\n",
		"size", "send", "build", "nic", "vxlan", "ctr", "drop", "app", "appBz", "hoTx", "hoRx", "hook", "xdp", "soft")
	for _, c := range sortedTable(t) {
		fmt.Fprintf(&b, "%34s %6d %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %5.0f %5.0f %5.2f\n", "",
			c.Size, c.Send, c.Build, c.NIC, c.VXLAN, c.Container, c.ContainerDrop, c.App, c.AppBusy, c.HandoffTx, c.HandoffRx, c.Hook, c.XDP, c.SoftShare)
	}
	return b.String()
}
