package netns

import (
	"os/exec"
	"testing"
)

// TestLive: a namespace held by its bind mount is live, the caller's own
// (held by its tasks) too; once deleted, with nothing else holding it, its
// inode is no longer.
func TestLive(t *testing.T) {
	name := testNS(t)
	id, err := Identify(name)
	if err != nil {
		t.Fatal(err)
	}
	self, err := Identify("")
	if err != nil {
		t.Fatal(err)
	}
	live, err := Live()
	if err != nil {
		t.Fatal(err)
	}
	if !live[id.Ino] || !live[self.Ino] {
		t.Fatalf("Live misses the mounted namespace %d (%v) or the caller's own %d (%v)", id.Ino, live[id.Ino], self.Ino, live[self.Ino])
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v %s", err, out)
	}
	if live, err = Live(); err != nil || live[id.Ino] {
		t.Errorf("namespace %d still live after ip netns del: %v", id.Ino, err)
	}
}
