package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSweepGoneNamespace: agents killed on both hosts of a testbed, one
// host's namespace then deleted. That agent's pins (its programs loaded,
// its tracepoint running on every CPU) and state have no name left to
// disable them by: the next disable, of any namespace, removes them. The
// other agent's leftovers, in a namespace that still exists, stay for
// 'falcon disable' of that namespace to undo.
func TestSweepGoneNamespace(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	kept, gone := testOptions(t, tb.Hosts[0].Netns), testOptions(t, tb.Hosts[1].Netns)
	gone.StateRoot, gone.PinRoot = kept.StateRoot, kept.PinRoot
	var keys []string
	for _, o := range []Options{kept, gone} {
		key, err := Key(o.Netns)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
		cmd := helperAgent(t, o, "")
		cmd.Process.Kill()
		cmd.Wait()
	}
	if out, err := exec.Command("ip", "netns", "del", gone.Netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v %s", gone.Netns, err, out)
	}
	for _, k := range keys {
		leftBehind(t, kept, k, true)
	}
	other := kept
	other.Netns = ""
	if was, err := Disable(other); err != nil || was {
		t.Fatalf("disable of the initial namespace, where nothing runs: %v %v", was, err)
	}
	leftBehind(t, kept, keys[1], false)
	leftBehind(t, kept, keys[0], true)
	if was, err := Disable(kept); err != nil || !was {
		t.Errorf("disable of %s: %v %v", kept.Netns, was, err)
	}
	leftBehind(t, kept, keys[0], false)
}

// leftBehind checks whether key's state directory and pins are there.
func leftBehind(t *testing.T, o Options, key string, want bool) {
	t.Helper()
	pins, _ := filepath.Glob(filepath.Join(o.pinDir(key), "falcon_*"))
	_, err := os.Stat(o.stateDir(key))
	if state := !errors.Is(err, os.ErrNotExist); state != want || (len(pins) > 0) != want {
		t.Errorf("%s: state directory there %v, %d pins; want leftovers %v", key, state, len(pins), want)
	}
}
