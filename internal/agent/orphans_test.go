package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/journal"
	"github.com/falconnet/falcon/internal/netns"
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

// TestRecycledKey: an agent killed, its namespace deleted, and the next
// namespace made gets its inode, so its key (device and inode) names the
// dead agent's state. The state's cookie tells them apart: status calls
// the new namespace not enabled, and the next sweep removes the leftovers
// without restoring the dead agent's values into the stranger.
func TestRecycledKey(t *testing.T) {
	needRoot(t)
	const lo = "/sys/class/net/lo/queues/rx-0/rps_cpus"
	a := fmt.Sprintf("fct%dka", os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", a).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", a).Run() })
	o := testOptions(t, a)
	key, err := Key(a)
	if err != nil {
		t.Fatal(err)
	}
	dir := o.stateDir(key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// What a killed agent leaves: its state, and a journal of what it set.
	st := State{Pid: 1 << 22, NetnsCookie: nsCookie(a), Options: o, Started: time.Now(), Ready: true}
	if st.NetnsCookie == 0 {
		t.Skip("this kernel has no netns cookie (before 5.14): a recycled key cannot be told (docs/operations-security.md)")
	}
	if err := fileutil.WriteJSON(filepath.Join(dir, stateFile), st, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(filepath.Join(dir, journalFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Apply(a, []journal.Change{{Path: lo, Value: "1"}}); err != nil { // lo's own was 0
		t.Fatal(err)
	}
	ino, err := netns.Inode(a)
	if err != nil {
		t.Fatal(err)
	}
	exec.Command("ip", "netns", "del", a).Run()
	b := recycleNetns(t, ino, fmt.Sprintf("fct%dkb", os.Getpid()%100000))
	ob := o
	ob.Netns = b
	if k, _ := Key(b); k != key {
		t.Fatalf("key %s, want the recycled %s", k, key)
	}
	write(t, b, lo, "1") // b's own value: a restore of a's would make it 0

	// Not a stranger's: a's own cookie, or none recorded, is b's.
	own := st
	own.NetnsCookie = nsCookie(b)
	for _, s := range []State{own, {NetnsCookie: 0}} {
		if recycled(&s, b) {
			t.Errorf("state with cookie %d taken for a gone namespace's (b's is %d)", s.NetnsCookie, own.NetnsCookie)
		}
	}
	if r, err := Status(ob); err != nil {
		t.Errorf("status of the new namespace: %v", err)
	} else if r.Enabled {
		t.Errorf("status of the new namespace: enabled, problem %q; want not enabled", r.Problem)
	}
	sweepOrphans(ob, key, testLog(t))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead agent's state %s is still there (%v)", dir, err)
	}
	if got := read(t, b, lo); got != "1" {
		t.Errorf("the new namespace's lo rps_cpus = %s: the dead agent's journal was restored into it", got)
	}
}
