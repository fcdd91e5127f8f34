package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Disable and Status of a namespace that does not exist, and where no
// agent left anything, say so instead of "not enabled", and touch nothing.
func TestDisableStatusUnknownNamespace(t *testing.T) {
	o := DefaultOptions()
	o.Netns = "fct-no-such-netns"
	o.StateRoot = filepath.Join(t.TempDir(), "run")
	o.PinRoot = filepath.Join(t.TempDir(), "bpf")
	if was, err := Disable(o); was || err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Disable: %v, %v; want a namespace-not-found error", was, err)
	}
	if r, err := Status(o); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Status: %+v, %v; want a namespace-not-found error", r, err)
	}
	for _, p := range []string{o.StateRoot, o.PinRoot} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s created", p)
		}
	}
}
