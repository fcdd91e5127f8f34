package agent

import (
	"errors"
	"fmt"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
)

// Splitting the NIC stage (--split, issue 4): the falcon mode also attaches
// the datapath's XDP program to every NIC it hooks, so that the NIC stage's
// skbs are built (and, from Linux 6.15, GRO'd) by cpumap kthreads on the
// split CPUs while the tc program on the NIC, which runs in those kthreads,
// keeps steering the VXLAN stage.

// validateSplit checks the split options without touching the system.
func (o *Options) validateSplit() error {
	if !o.Split {
		if o.SplitCPUs != nil || o.SplitProto != "" || o.HostNICs != nil {
			return errors.New("--split-cpus, --split-proto and --host-nics need --split")
		}
		return nil
	}
	if o.Mode != ModeFalcon {
		return fmt.Errorf("--split needs mode %s: splitting hands the NIC stage to other CPUs, and only falcon's tc program on the NIC "+
			"then steers the stage after it (mode %s has none)", ModeFalcon, o.Mode)
	}
	if o.SplitCPUs != nil {
		if len(o.SplitCPUs) == 0 {
			return errors.New("--split-cpus: empty CPU set")
		}
		if err := cpuset.Check(o.SplitCPUs); err != nil {
			return fmt.Errorf("--split-cpus: %w", err)
		}
	}
	return nil
}

// splitSet is the split CPU set: --split-cpus, else the Falcon set.
func (o *Options) splitSet() []int {
	if o.SplitCPUs != nil {
		return o.SplitCPUs
	}
	return o.CPUs
}

// checkSplit asks each NIC's driver for native XDP before anything
// changes, and logs what the kernel lacks.
func (m *falconMode) checkSplit(h *Host, ov *discover.Overlay) error {
	if !h.Opts.Split {
		return nil
	}
	for _, nic := range append(ov.Role(discover.RoleNIC), ov.Role(discover.RoleHostNIC)...) {
		s, err := datapath.CheckSplit(nic.Netns, nic.Ifindex, nic.Name)
		if err != nil {
			return err
		}
		for _, n := range s.Notes {
			h.Log().Warn("split", "note", n)
		}
	}
	return nil
}

// syncSplits attaches the XDP program to the NICs among want and the host
// NICs of ov, and detaches it from NICs no longer there. Each is recorded
// in the state before it is attached, so that Disable finds it after a
// crash.
func (m *falconMode) syncSplits(h *Host, ov *discover.Overlay, want map[string]datapath.Hook, strict bool) error {
	if !h.Opts.Split {
		return nil
	}
	if m.splits == nil {
		m.splits = map[string]datapath.SplitHook{}
	}
	nics := map[string]datapath.SplitHook{}
	for k, hk := range want {
		if hk.Role == datapath.HookOnNIC {
			nics[k] = datapath.SplitHook{Netns: hk.Netns, Ifindex: hk.Ifindex, Name: hk.Name}
		}
	}
	for _, d := range ov.Role(discover.RoleHostNIC) {
		nics[d.Key()] = datapath.SplitHook{Netns: d.Netns, Ifindex: d.Ifindex, Name: d.Name, HostNIC: true}
	}
	var errs []error
	for k, old := range m.splits {
		if nw, ok := nics[k]; ok && nw == old {
			continue
		}
		if err := m.dp.DetachSplit(old); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(m.splits, k)
		h.RemoveHooks(old.Hook())
	}
	for k, s := range nics {
		if _, ok := m.splits[k]; ok {
			continue
		}
		if err := h.AddHooks(s.Hook()); err != nil {
			return err
		}
		if err := m.dp.AttachSplit(s); err != nil {
			h.RemoveHooks(s.Hook())
			if strict {
				return err
			}
			errs = append(errs, err)
			continue
		}
		m.splits[k] = s
		m.hookLog(h)("NIC stage split (XDP, cpumap)", "nic", s.Name, "cpus", cpuset.Format(h.Opts.splitSet()))
	}
	return errors.Join(errs...)
}

// forgetSplits drops the split hooks from the state once the datapath,
// and with it their XDP programs, is closed.
func (m *falconMode) forgetSplits(h *Host) {
	for _, s := range m.splits {
		h.RemoveHooks(s.Hook())
	}
	m.splits = nil
}

// SplitReport is what falcon status shows of splitting.
type SplitReport struct {
	CPUs  string `json:"cpus"`
	Proto string `json:"proto"`
	// PerCPU is each split CPU's cpumap traffic; CPUs without any yet
	// show zeros.
	PerCPU map[int]datapath.CPUMapStats `json:"per_cpu"`
	// Micro is set in mode mflow: elephants split into micro-flows.
	Micro *MicroReport `json:"micro_flows,omitempty"`
}

// MicroReport is mode mflow at work: its settings, the micro-flows the
// split hook started, and the packets sent in them (at the split hook, and
// left inline by the tc hooks after it).
type MicroReport struct {
	Batch         int    `json:"batch"`
	Elephant      string `json:"elephant"` // bit/s, as --elephant takes it
	UDP           bool   `json:"udp"`      // UDP flows split too (--allow-reorder): they may reach the socket out of order
	Started       uint64 `json:"started"`
	SplitPackets  uint64 `json:"split_packets"`
	InlinePackets uint64 `json:"inline_packets"`
}

func splitReport(o Options, c datapath.Counters) *SplitReport {
	if !o.Split {
		return nil
	}
	proto := o.SplitProto
	if proto == "" {
		proto = datapath.SplitAll
	}
	r := &SplitReport{CPUs: cpuset.Format(o.splitSet()), Proto: proto, PerCPU: map[int]datapath.CPUMapStats{}}
	for _, cpu := range o.splitSet() {
		r.PerCPU[cpu] = c.CPUMap[cpu]
	}
	for cpu, s := range c.CPUMap {
		r.PerCPU[cpu] = s
	}
	if o.Batch > 0 {
		m := &MicroReport{Batch: o.Batch, Elephant: formatRate(o.Elephant), UDP: o.AllowReorder}
		for _, st := range c.Stages {
			m.Started += st.MicroFlows
			if st.Hook.Role == datapath.HookSplit {
				m.SplitPackets += st.Micro
			} else {
				m.InlinePackets += st.Micro
			}
		}
		r.Micro = m
	}
	return r
}
