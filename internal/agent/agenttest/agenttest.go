// Package agenttest is what the tests of the binaries (cmd/falcon and
// cmd/falcon-lab) check of the agent's traces on the node: state left
// behind, the global RFS table.
package agenttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

// LeftState lists the agents' state directories whose state names a
// namespace with the given prefix: a namespace that may be gone, which no
// key can be computed for any more.
func LeftState(prefix string) []string {
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

// SockFlowEntries is the global RFS table's size, which rfs modes set and
// must restore.
func SockFlowEntries(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(agent.SockFlowPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
