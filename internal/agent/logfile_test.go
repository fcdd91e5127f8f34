package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The log of an agent that enable started is bounded: past LogLimit it
// moves to agent.log.1 and a new one starts, so the state directory holds
// at most twice the limit however much the agent logs.
func TestLogRotates(t *testing.T) {
	defer func(l int64) { LogLimit = l }(LogLimit)
	LogLimit = 1000
	o := DefaultOptions()
	o.StateRoot = t.TempDir()
	dir, err := StateDir(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LogFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log := NewLogger(logWriter(o, f), LogText)
	for i := range 200 {
		log.Info("a decision that matters", "n", i)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatalf("no rotated log: %v", err)
	}
	if len(cur) > int(LogLimit) || len(old) > int(LogLimit) {
		t.Errorf("logs of %d and %d bytes, limit %d", len(cur), len(old), LogLimit)
	}
	if !strings.Contains(string(cur), "n=199") {
		t.Errorf("the last line is not in the current log:\n%s", cur)
	}
	// Elsewhere (a terminal, the journal): left as it is.
	other, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if w := logWriter(o, other); w != other {
		t.Errorf("a log that is not the state directory's is wrapped: %T", w)
	}
}
