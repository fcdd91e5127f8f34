package agent

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A corrupt or truncated state file never keeps the values from being
// restored: Disable, and an agent that starts after a dead one, restore
// every value the journal holds, say what the state's loss costs, and
// leave nothing behind. A state that names a pin directory not its own
// has that directory left alone.
func TestCorruptStateRecovery(t *testing.T) {
	needRootRPS(t)
	needRoot(t)
	tb := rpsBed(t, "cs", "docker", 1)
	plant(t, tb)
	before := rxValues(t, tb)
	decoy := t.TempDir()
	keep := filepath.Join(decoy, "falcon_keep")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ then, corrupt string }{
		{"disable", "truncated"}, {"start", "truncated"}, {"disable", "pin_dir"}, {"disable", "empty"},
	} {
		t.Run(c.then+"/"+c.corrupt, func(t *testing.T) {
			var logs bytes.Buffer
			o := testOptions(t, tb.Hosts[1].Netns)
			o.Mode, o.ContainerLevel = ModeRPS, true
			if _, err := Apply(o); err != nil {
				t.Fatal(err)
			}
			if sameRxQuiet(before, rxValues(t, tb)) {
				t.Fatal("apply changed nothing")
			}
			dir, err := StateDir(o)
			if err != nil {
				t.Fatal(err)
			}
			sf := filepath.Join(dir, stateFile)
			b, err := os.ReadFile(sf)
			if err != nil {
				t.Fatal(err)
			}
			switch c.corrupt {
			case "truncated":
				b = b[:len(b)/2]
			case "empty":
				b = nil
			case "pin_dir":
				b = bytes.Replace(b, []byte(`"options"`), []byte(`"pin_dir":"`+decoy+`","options"`), 1)
			}
			if err := os.WriteFile(sf, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if r, err := Status(o); c.corrupt != "pin_dir" && (err != nil || !strings.Contains(r.Problem, "falcon disable")) {
				t.Errorf("status with the state %s: %+v, %v", c.corrupt, r, err)
			}
			o.Log = slog.New(slog.NewTextHandler(&logs, nil))
			switch c.then {
			case "disable":
				if was, err := Disable(o); !was || err != nil {
					t.Fatalf("disable: %v, %v", was, err)
				}
			case "start":
				f := o
				f.Mode, f.ContainerLevel = ModeFalcon, false
				a, err := Start(context.Background(), f)
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Stop(); err != nil {
					t.Fatal(err)
				}
			}
			sameRx(t, c.then, before, rxValues(t, tb))
			noState(t, o)
			if c.corrupt != "pin_dir" && !strings.Contains(logs.String(), "state is unreadable") {
				t.Errorf("nothing said about the state's loss:\n%s", logs.String())
			}
			if _, err := os.Stat(keep); err != nil {
				t.Errorf("a pin directory the state named: %v", err)
			}
		})
	}
}

// sameRxQuiet says whether two sets of values agree.
func sameRxQuiet(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if normMask(b[k]) != normMask(v) {
			return false
		}
	}
	return true
}

// An agent that runs with its state unreadable is stopped by Disable all
// the same (the kernel's lock record names it), and undoes its changes.
func TestDisableStopsAgentWithCorruptState(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	o := testOptions(t, tb.Hosts[1].Netns)
	cmd := helperAgent(t, o, "")
	dir, err := StateDir(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"pid":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if was, err := Disable(o); err != nil || !was {
		t.Fatalf("Disable: %v %v", was, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exited with %v", err)
	}
	noTrace(t, tb, o)
}
