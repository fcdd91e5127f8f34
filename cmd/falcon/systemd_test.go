package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

// The systemd unit starts the agent with flags it accepts.
func TestSystemdUnitFlags(t *testing.T) {
	b, err := os.ReadFile("../../deploy/systemd/falcon-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=\S+/falcon agent (.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no ExecStart=.../falcon agent line")
	}
	args := strings.Fields(string(m[1]))
	fs := newFlagSet("agent", "")
	f := agent.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		t.Fatalf("falcon agent %s: %v", m[1], err)
	}
	if _, err := agentOptions(f); err != nil {
		t.Errorf("falcon agent %s: %v", m[1], err)
	}
}
