package agent

import (
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/policy"
)

// actuator is the falcon mode as the engagement policy's engine sees it
// (policy.Mode): what it may switch, and what it reads.
type actuator struct {
	m *falconMode
	h *Host
}

func (a actuator) SetLoad(perCPU []uint32, avg uint32, monotonicNs uint64) error {
	if err := a.m.dp.SetLoad(perCPU, avg, monotonicNs); err != nil {
		return err
	}
	a.m.countSample(a.h, monotonicNs)
	return nil
}

func (a actuator) Steer(on bool) error       { return a.m.dp.SetEngaged(on) }
func (a actuator) StandDown(why string) bool { return a.m.standDown(a.h, why) }
func (a actuator) StandUp(why string) error  { return a.m.standUp(a.h, why) }
func (a actuator) Netns() []string           { return a.m.containerNetns() }
func (a actuator) Path() (stoodDown, engaged bool) {
	c := a.m.dp.Config()
	return c.StoodDown, c.Engaged
}

// NICPackets sums what the NIC hooks ran on each CPU.
func (a actuator) NICPackets() (map[int]uint64, error) {
	cnt, err := a.m.dp.Counters()
	if err != nil {
		return nil, err
	}
	nic := map[int]uint64{}
	for _, s := range cnt.Stages {
		if s.Hook.Role == datapath.HookOnNIC {
			for cpu, n := range s.RanOn {
				nic[cpu] += n
			}
		}
	}
	return nic, nil
}

// engine makes the engagement policy's engine for h's options, over mode
// (the falcon mode's actuator; a test's recording one).
func (m *falconMode) engine(h *Host, mode policy.Mode) (*policy.Engine, error) {
	return policy.New(policy.Config{Params: m.policyParams(h), Policy: h.Opts.Policy, Interval: h.Opts.Interval}, mode)
}

// policyParams: what the engagement policy decides by, and where it keeps
// what it decided (the state file, for status).
func (m *falconMode) policyParams(h *Host) policy.Params {
	return policy.Params{Threshold: h.Opts.Threshold, CPUs: h.Opts.CPUs, SplitCPUs: h.Opts.SplitCPUs, Log: h.Log(),
		Counters: &m.counters, Causes: &m.causes,
		Save: func(update func(*policy.Engagement) *policy.Engagement) error {
			return h.update(func(s *State) { s.Engagement = update(s.Engagement) })
		}}
}
