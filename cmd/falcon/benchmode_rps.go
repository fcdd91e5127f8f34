package main

import (
	"context"
	"fmt"
	"os"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/bench"
	"github.com/falconnet/falcon/internal/testbed"
)

// rpsBench is one of the Kubernetes RPS/RFS study's configurations as a
// bench mode: the agent's rps or rfs mode on the receiving host (h2, the
// study's server node, the only one it configured), with "+" also on the
// containers' eth0.
type rpsBench struct {
	name, mode string
	plus       bool
}

func (m rpsBench) Name() string { return m.name }

func (m rpsBench) Setup(ctx context.Context, tb *testbed.Testbed) (func() error, error) {
	o := agent.DefaultOptions()
	o.Netns = tb.Hosts[1].Netns
	o.Mode, o.ContainerLevel = m.mode, m.plus
	o.Logf = func(string, ...any) {} // the bench's progress bar owns the terminal
	a, err := agent.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	return a.Stop, nil
}

func (m rpsBench) Unsupported(layout string) string {
	switch {
	case layout == "host":
		return "the host layout has no overlay for RPS/RFS on it"
	case layout == "vxlan" && m.plus:
		return "the vxlan layout has no containers for the container level"
	}
	return ""
}

func (m rpsBench) Preflight() error {
	if m.mode != agent.ModeRFS {
		return nil
	}
	if _, err := os.Stat(agent.SockFlowPath); err != nil {
		return fmt.Errorf("RFS needs %s, which only the initial network namespace has: %w", agent.SockFlowPath, err)
	}
	return nil
}

func init() {
	for _, m := range []rpsBench{{"rps", agent.ModeRPS, false}, {"rps+", agent.ModeRPS, true},
		{"rfs", agent.ModeRFS, false}, {"rfs+", agent.ModeRFS, true}} {
		bench.RegisterMode(m)
	}
}
