package sim

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/lab/schema"
)

// Mode is a mode of the lab's as the model runs it: the same specs as
// bench --modes ("vanilla", "falcon:policy=paper", "falcon+split",
// "rps:devices=vxlan0,rps-cpus=1", …), read by schema.ParseMode.
type Mode struct{ schema.Mode }

// ParseMode reads a mode spec. Errors name the modes the model knows.
func ParseMode(spec string) (Mode, error) {
	m, err := schema.ParseMode(spec)
	if err != nil {
		return Mode{}, fmt.Errorf("%v (the model runs every mode of: %s but mflow)", err, strings.Join(schema.ModeNames(), ", "))
	}
	// Micro-flows reorder TCP, whose reaction (out-of-order queue,
	// retransmissions, the congestion window) is what they cost: the model
	// has no TCP, so it does not pretend to predict them.
	if m.Opts.Batch > 0 {
		return Mode{}, fmt.Errorf("mode %s: the model has no micro-flows (it has no TCP, whose reaction to their reordering is their cost); "+
			"measure them with falcon-lab bench --preset mflow7", m.Spec)
	}
	return Mode{m}, nil
}

func (m Mode) vanilla() bool { return m.Vanilla }
func (m Mode) falcon() bool  { return m.Opts.Mode == agent.ModeFalcon }
func (m Mode) rfs() bool     { return m.Opts.Mode == agent.ModeRFS }
func (m Mode) rps() bool     { return m.Opts.Mode == agent.ModeRPS }

// rpsOn says on which of the receiving host's devices RPS (or RFS)
// decides the next stage's CPU: the study's modes set the NIC and the
// VXLAN devices (a devices setting may narrow the VXLAN devices, never
// the NIC), and with container-level the containers' eth0.
func (m Mode) rpsOn() (nic, vxlan, container bool) {
	if !m.rps() && !m.rfs() {
		return
	}
	return true, true, m.Opts.ContainerLevel
}

// Placement is where each role runs, as bench places them.
type Placement = schema.Placement
