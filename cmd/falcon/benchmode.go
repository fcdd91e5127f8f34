package main

import (
	"context"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/bench"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/testbed"
)

// falconBench is bench's "falcon" mode: an in-process agent with the
// default settings on the receiving host (h2) of each testbed; with split,
// "falcon+split" (benchsplit.go), the same with --split.
type falconBench struct{ split bool }

func (b falconBench) Name() string {
	if b.split {
		return agent.ModeFalcon + "+split"
	}
	return agent.ModeFalcon
}

func (b falconBench) Setup(ctx context.Context, tb *testbed.Testbed) (func() error, error) {
	o := agent.DefaultOptions()
	o.Netns = tb.Hosts[1].Netns
	o.Split = b.split
	o.Logf = func(string, ...any) {} // the bench's progress bar owns the terminal
	a, err := agent.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	return a.Stop, nil
}

func (falconBench) Unsupported(layout string) string {
	if layout == "host" {
		return "the host layout has no overlay for falcon to steer"
	}
	return ""
}

func (b falconBench) Preflight() error {
	if b.split {
		return datapath.SplitSupported()
	}
	return datapath.Supported()
}

func init() { bench.RegisterMode(falconBench{}) }
