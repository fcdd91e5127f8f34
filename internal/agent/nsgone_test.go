package agent

import (
	"os/exec"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

// TestAgentStopsWhenNamespaceGoes: the namespace of a running agent is
// deleted (a testbed taken down around it): the agent stops by itself,
// removes its pins and state, and lets the namespace go, rather than run
// on, warning, and keep it alive with its sockets.
func TestAgentStopsWhenNamespaceGoes(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	o := testOptions(t, tb.Hosts[1].Netns)
	key, err := Key(o.Netns)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := parseKey(key)
	cmd := helperAgent(t, o, "")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if out, err := exec.Command("ip", "netns", "del", o.Netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v %s", o.Netns, err, out)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the agent exited with %v", err)
		}
	case <-time.After(time.Minute): // a hang guard: discovery looks every 5 s
		t.Fatal("the agent still runs a minute after its namespace was deleted")
	}
	leftBehind(t, o, key, false)
	live, err := netns.Live()
	if err != nil {
		t.Skip(err)
	}
	if live[id.Ino] {
		t.Errorf("namespace inode %d still held after the agent exited", id.Ino)
	}
}
