package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// leftState lists the agents' state directories whose state names a
// namespace with the given prefix: a namespace that may be gone, which no
// key can be computed for any more.
func leftState(prefix string) []string {
	es, _ := os.ReadDir(agent.DefaultStateRoot)
	var left []string
	for _, e := range es {
		dir := filepath.Join(agent.DefaultStateRoot, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "state.json"))
		var st agent.State
		if err == nil && json.Unmarshal(b, &st) == nil && strings.HasPrefix(st.Options.Netns, prefix) {
			left = append(left, dir)
		}
	}
	return left
}
