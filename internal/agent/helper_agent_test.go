package agent

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// TestKilledAgent kills an agent with SIGKILL, as the OOM killer would;
// Disable must then undo everything it left.
//
// guest: pins across a SIGKILL, then disable, on the old kernel
func TestKilledAgent(t *testing.T) {
	needRoot(t)
	tb := bed(t, "calico", 1)
	h := tb.Hosts[1]
	ov, err := discover.Discover(h.Netns)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ov)
	o := testOptions(t, h.Netns)
	cmd := helperAgent(t, o, "")
	cmd.Process.Kill()
	cmd.Wait()

	r, err := Status(o)
	if err != nil || !r.Enabled || r.Running || r.Ready || !strings.Contains(r.Problem, "falcon disable") {
		t.Errorf("status after kill: %+v %v", r, err)
	}
	if was, err := Disable(o); err != nil || !was {
		t.Fatalf("Disable: %v %v", was, err)
	}
	after := snapshot(t, ov)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s = %q after disable, was %q", k, after[k], v)
		}
	}
	noTrace(t, tb, o)
	if was, err := Disable(o); err != nil || was {
		t.Errorf("second Disable: %v %v", was, err)
	}
}

// helperAgent runs TestHelperAgent as an agent in a process of its own
// on o's namespace (policy "paper": killPolicy's) and returns
// once it is ready. When the test ends the process is killed and what it
// left is undone, so that a test failing halfway leaves nothing for the
// next one to find.
func helperAgent(t *testing.T, o Options, policy string) *exec.Cmd {
	t.Helper()
	env := "FALCON_TEST_AGENT=" + o.Netns + "," + o.StateRoot + "," + o.PinRoot
	if policy != "" {
		env += "," + policy
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgent$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		// A test may have removed the namespace (TestSweepGoneNamespace).
		if _, err := Disable(o); err != nil && netns.Exists(o.Netns) {
			t.Errorf("disable after the test: %v", err)
		}
	})
	// A hang guard, not a speed test: in the 6.1 guest under emulation a
	// helper took 18 s to attach its first hook and over 30 s to be ready.
	deadline := time.Now().Add(2 * time.Minute)
	for r, err := Status(o); err != nil || !r.Ready; r, err = Status(o) {
		if time.Now().After(deadline) {
			t.Fatalf("helper agent never became ready: %+v %v", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd
}

// TestHelperAgent is the agent helperAgent runs.
func TestHelperAgent(t *testing.T) {
	env := os.Getenv("FALCON_TEST_AGENT")
	if env == "" {
		t.Skip("helper process of TestKilledAgent")
	}
	f := strings.Split(env, ",")
	o := DefaultOptions()
	o.Netns, o.StateRoot, o.PinRoot = f[0], f[1], f[2]
	if len(f) > 3 && f[3] == "paper" {
		killPolicy(&o)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDisableStopsAgent: Disable signals a live agent in another process,
// which undoes its own changes.
//
// guest: disable stopping a live agent, which detaches on the old kernel
func TestDisableStopsAgent(t *testing.T) {
	needRoot(t)
	tb := bed(t, "flannel", 1)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	cmd := helperAgent(t, o, "")
	if was, err := Disable(o); err != nil || !was {
		t.Fatalf("Disable: %v %v", was, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exited with %v", err)
	}
	noTrace(t, tb, o)
}
