package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"path/filepath"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
)

// TestDrillRecycledNetnsInode: the kernel hands a new network namespace
// the inode number of one destroyed a moment ago (nsfs inodes come from
// proc's lowest-free allocator; the churn drill saw 44 of 50 new containers
// get an inode a removed one had had). A container replaced by another
// that gets its inode, both within one look of the agent's, must leave
// nothing of the old one and get everything for the new one: the new end
// its arrival counter, the journal no entry of the old one, and the new
// end's own value back on disable, not the old one's.
func TestDrillRecycledNetnsInode(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	o.Policy = datapath.PolicyPaper // no engagement test that could stand down meanwhile
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.Stop()
		}
	}()
	mask := cpuset.Mask(a.Host().Opts.CPUs)
	stages, err := ebpf.LoadPinnedMap(filepath.Join(a.Host().PinDir, "falcon_stages"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stages.Close()
	pfx := fmt.Sprintf("fct%dri", os.Getpid()%100000)
	var made []string
	t.Cleanup(func() {
		for _, ns := range made {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	sh := func(script string) {
		t.Helper()
		if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s\n%s", err, script, out)
		}
	}
	// plug wires container namespace ns (made already) to the bridge, its
	// eth0's rps_cpus set to rps first (as its operator left it).
	n := 0
	plug := func(ns, rps string) string {
		n++
		veth := fmt.Sprintf("vri%d%d", os.Getpid()%10000, n)
		sh(fmt.Sprintf("ip -n %[2]s link add %[3]s type veth peer name eth0 netns %[1]s\nip -n %[1]s link set eth0 up", ns, h.Netns, veth))
		write(t, ns, "/sys/class/net/eth0/queues/rx-0/rps_cpus", rps)
		sh(fmt.Sprintf("ip -n %s link set %s master %s up", h.Netns, veth, h.Bridge))
		return veth
	}
	addNS := func(ns string) uint64 {
		t.Helper()
		sh("ip netns add " + ns)
		made = append(made, ns)
		ino, err := netns.Inode(ns)
		if err != nil {
			t.Fatal(err)
		}
		return ino
	}
	followed := func(ns string) endState {
		t.Helper()
		var e endState
		deadline := time.Now().Add(5 * time.Second) // a hang guard
		for {
			e, err = readEnd(ns, stages, a.Host().Dir)
			// The whole state, not its first part: RPS is set last, but a
			// read that failed meanwhile would miss a part that is there.
			if err == nil && e.lacks(mask) == "" || time.Now().After(deadline) {
				return e
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	nsA := pfx + "a"
	inoA := addNS(nsA)
	vethA := plug(nsA, "1")
	if e := followed(nsA); e.lacks(mask) != "" {
		t.Fatalf("A not followed: %s (last read: %v)", e.lacks(mask), err)
	}

	// The agent's next look sees A gone and B there at once, as a look
	// that coalesces a pod's replacement does (its watch waits for a burst
	// of changes to settle, and the agent for the update before, which
	// holds the mode for a second or more when falcon comes back). Here the
	// test makes that look itself: the agent's own following stops first.
	a.cancel()
	<-a.done
	sh(fmt.Sprintf("ip -n %s link del %s\nip netns del %s", h.Netns, vethA, nsA))
	made = made[1:]
	nsB := recycleNetns(t, inoA, pfx+"p")
	plug(nsB, "0")
	ov, err := discoverOverlay(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.mode.Update(a.Host(), ov); err != nil {
		t.Fatal(err)
	}

	e, err := readEnd(nsB, stages, a.Host().Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("B (%s) got A's inode %d; guard key %+v", nsB, inoA, e.key)
	if l := e.lacks(mask); l != "" {
		t.Errorf("B, which got the inode of A just removed, is not steered: %s", l)
	}
	var stale []string
	for _, en := range a.Host().journal.Entries() {
		if en.Netns == nsA {
			stale = append(stale, en.Path+" (old "+en.Old+")")
		}
	}
	if len(stale) > 0 {
		t.Errorf("the journal kept A's entries after A was removed: %s", strings.Join(stale, ", "))
	}
	ko, err := listKernelObjects()
	if err != nil {
		t.Fatal(err)
	}
	if d := defunctLinks(ko); d != 0 {
		t.Errorf("%d falcon links on a vanished device (A's arrival counter not closed)", d)
	}

	stages.Close()
	stopped = true
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, nsB, "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != "0" {
		t.Errorf("B's rps_cpus = %s after disable, want its own 0 (A's was 1)", got)
	}
}

// recycleNetns makes namespaces named prefix<k> until one gets inode ino,
// of a namespace just removed, and returns its name; it skips the test if
// none does within 10 s. The kernel hands out the lowest free inode, so
// probes that got a lower one are kept (using up the lower ones freed
// meanwhile) and the others removed again; every probe goes when the test
// ends.
func recycleNetns(t *testing.T, ino uint64, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for k := 0; time.Now().Before(deadline); k++ {
		ns := fmt.Sprintf("%s%d", prefix, k)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		got, err := netns.Inode(ns)
		switch {
		case err == nil && got == ino:
			t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
			return ns
		case err == nil && got < ino:
			t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		default:
			exec.Command("ip", "netns", "del", ns).Run()
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Skipf("no new namespace got the inode %d of one just removed", ino)
	return ""
}
