package main

import (
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

// stateDirOf is where the agent of namespace ns keeps its state: a directory
// named for the namespace itself, not for the name given (agent.Key).
func stateDirOf(t *testing.T, ns string) string {
	t.Helper()
	o := agent.DefaultOptions()
	o.Netns = ns
	d, err := agent.StateDir(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pinDirOf is where the agent of namespace ns pins its maps.
func pinDirOf(t *testing.T, ns string) string {
	t.Helper()
	o := agent.DefaultOptions()
	o.Netns = ns
	d, err := agent.PinDir(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
