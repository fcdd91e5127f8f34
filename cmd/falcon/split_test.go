package main

import (
	"errors"
	"slices"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cli"
)

// TestSplitFlags: --split, --split-cpus and --split-proto reach the
// options, survive the trip to the agent enable starts, and a bad protocol
// is a usage error.
func TestSplitFlags(t *testing.T) {
	parse := func(args ...string) (agent.Options, error) {
		fs := app.FlagSet("enable", agentSynopsis)
		f := agent.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return agentOptions(f)
	}
	o, err := parse("--split", "--split-cpus", "1,3", "--split-proto", "tcp")
	if err != nil {
		t.Fatal(err)
	}
	if !o.Split || !slices.Equal(o.SplitCPUs, []int{1, 3}) || o.SplitProto != "tcp" {
		t.Errorf("options: split %v, CPUs %v, proto %q", o.Split, o.SplitCPUs, o.SplitProto)
	}
	again, err := parse(agent.Args(o)...)
	if err != nil {
		t.Fatal(err)
	}
	if !agent.SameSettings(o, again) {
		t.Errorf("agent args %v lose settings: %+v, then %+v", agent.Args(o), o, again)
	}
	if o, err := parse(); err != nil || o.Split || o.SplitCPUs != nil || o.SplitProto != "" {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	_, err = parse("--split", "--split-proto", "sctp")
	var ue cli.UsageError
	if !errors.As(err, &ue) {
		t.Errorf("--split-proto sctp: %v, want a usage error", err)
	}
}
