package testbed

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNameInUse(t *testing.T) {
	needRoot(t)
	s := Spec{Name: tbName("inuse"), Layout: "host"}
	tb := up(t, s)
	_, err := Up(context.Background(), Spec{Name: s.Name, Layout: "docker"})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Up with the same name: %v, want 'in use'", err)
	}
	// The first testbed is untouched.
	got, err := Get(s.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Layout != "host" || !reflect.DeepEqual(got.Hosts, tb.Hosts) {
		t.Errorf("Get = %+v, want %+v", got, tb)
	}
	list, err := List()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range list {
		if l.Name == s.Name {
			found = len(l.Problems) == 0 && l.Layout == "host"
		}
	}
	if !found {
		t.Errorf("List does not show %s as a whole host testbed: %+v", s.Name, list)
	}
}

func TestUpChecksBeforeMaking(t *testing.T) {
	needRoot(t)
	name := tbName("check")
	t.Cleanup(func() { Down(name) })
	for _, s := range []Spec{
		{Name: name, Layout: "weave"},
		{Name: name, Layout: "docker", Containers: MaxContainers + 1},
	} {
		if _, err := Up(context.Background(), s); err == nil {
			t.Errorf("Up(%+v) succeeded", s)
		}
	}
	t.Setenv("PATH", t.TempDir()) // no ip, no ethtool
	_, err := Up(context.Background(), Spec{Name: name, Layout: "docker"})
	if err == nil || !strings.Contains(err.Error(), "iproute2") {
		t.Errorf("Up without tools: %v, want a hint to install iproute2", err)
	}
	assertGone(t, name)
}

func TestUpCancelledRemovesWhatItMade(t *testing.T) {
	needRoot(t)
	name := tbName("cancel")
	t.Cleanup(func() { Down(name) })
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel once the first namespaces exist, in the middle of the build.
	go func() {
		for ctx.Err() == nil {
			if nss, _ := owned(name); len(nss) > 0 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := Up(ctx, Spec{Name: name, Layout: "calico", Containers: 8})
	cancel()
	if err == nil {
		t.Skip("Up finished before it could be cancelled")
	}
	assertGone(t, name)
}

// A kill -9 of 'up' leaves namespaces and no state; Down and DownAll find
// them by name alone.
func TestDownAfterHalfMadeUp(t *testing.T) {
	needRoot(t)
	for _, all := range []bool{false, true} {
		name := tbName("half")
		if all {
			name += "-all"
		}
		t.Cleanup(func() { Down(name) })
		for _, ns := range []string{hostNS(name, "h2"), containerNS(name, "h1", 3)} {
			if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		}
		if _, err := Get(name); err == nil || !strings.Contains(err.Error(), "no state file") {
			t.Errorf("Get of a half-made testbed: %v, want 'no state file'", err)
		}
		if _, err := Up(context.Background(), Spec{Name: name, Layout: "host"}); err == nil || !strings.Contains(err.Error(), "in use") {
			t.Errorf("Up over a half-made testbed: %v, want 'in use'", err)
		}
		var err error
		if all {
			// DownAll itself would take down testbeds of others using this
			// machine; downAll is DownAll restricted to ours.
			err = downAll(func(n string) bool { return n == name })
		} else {
			err = Down(name)
		}
		if err != nil {
			t.Fatal(err)
		}
		assertGone(t, name)
	}
}

func TestVanishedNamespace(t *testing.T) {
	needRoot(t)
	tb := up(t, Spec{Name: tbName("vanish"), Layout: "docker"})
	if out, err := exec.Command("ip", "netns", "del", tb.Hosts[1].Netns).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	_, err := Get(tb.Name)
	if err == nil || !strings.Contains(err.Error(), tb.Hosts[1].Netns+" is gone") {
		t.Errorf("Get: %v, want it to name the vanished namespace", err)
	}
	if err := Down(tb.Name); err != nil {
		t.Fatal(err)
	}
	assertGone(t, tb.Name)
	if _, err := Get(tb.Name); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Down: %v, want ErrNotFound", err)
	}
	if err := Down(tb.Name); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

// A process left inside would keep its namespace alive after 'ip netns del'.
func TestDownKillsProcessesInside(t *testing.T) {
	needRoot(t)
	tb := up(t, Spec{Name: tbName("procs"), Layout: "host"})
	sleeper := inNS(tb.Hosts[1].Netns, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	t.Cleanup(func() { sleeper.Process.Kill() })
	// 'ip netns exec' has entered the namespace once it execs sleep.
	for i := 0; i < 100; i++ {
		if out, _ := exec.Command("ip", "netns", "pids", tb.Hosts[1].Netns).Output(); len(out) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := Down(tb.Name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process inside the testbed survived Down")
	}
	assertGone(t, tb.Name)
	if _, err := os.Stat(statePath(tb.Name)); err == nil {
		t.Error("state file survived Down")
	}
}
