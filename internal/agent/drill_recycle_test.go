package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/testbed"
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
	c := &handContainers{t: t, h: h}
	t.Cleanup(func() {
		for _, ns := range c.made {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})

	nsA := pfx + "a"
	inoA := c.addNS(nsA)
	vethA := c.plug(nsA, "1")
	if e, err := followed(a, stages, nsA, mask); e.lacks(mask) != "" {
		t.Fatalf("A not followed: %s (last read: %v)", e.lacks(mask), err)
	}

	// The agent's next look sees A gone and B there at once, as a look
	// that coalesces a pod's replacement does (its watch waits for a burst
	// of changes to settle, and the agent for the update before, which
	// holds the mode for a second or more when falcon comes back). Here the
	// test makes that look itself: the agent's own following stops first.
	a.cancel()
	<-a.done
	c.sh(fmt.Sprintf("ip -n %s link del %s\nip netns del %s", h.Netns, vethA, nsA))
	c.made = c.made[1:]
	nsB := recycleNetns(t, inoA, pfx+"p")
	c.plug(nsB, "0")
	ov, err := discoverOverlay(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.mode.Update(a.Host(), ov); err != nil {
		t.Fatal(err)
	}
	checkRecycled(t, a, stages, nsA, nsB, inoA, mask)

	stages.Close()
	stopped = true
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, nsB, "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != "0" {
		t.Errorf("B's rps_cpus = %s after disable, want its own 0 (A's was 1)", got)
	}
}

// handContainers makes container namespaces by hand on host h, wired to
// its bridge; made are those still to delete.
type handContainers struct {
	t    *testing.T
	h    testbed.Host
	made []string
	n    int
}

func (c *handContainers) sh(script string) {
	c.t.Helper()
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		c.t.Fatalf("%v\n%s\n%s", err, script, out)
	}
}

// addNS makes namespace ns and returns its inode.
func (c *handContainers) addNS(ns string) uint64 {
	c.t.Helper()
	c.sh("ip netns add " + ns)
	c.made = append(c.made, ns)
	ino, err := netns.Inode(ns)
	if err != nil {
		c.t.Fatal(err)
	}
	return ino
}

// plug wires container namespace ns (made already) to the bridge, its
// eth0's rps_cpus set to rps first (as its operator left it).
func (c *handContainers) plug(ns, rps string) string {
	c.n++
	veth := fmt.Sprintf("vri%d%d", os.Getpid()%10000, c.n)
	c.sh(fmt.Sprintf("ip -n %[2]s link add %[3]s type veth peer name eth0 netns %[1]s\nip -n %[1]s link set eth0 up", ns, c.h.Netns, veth))
	write(c.t, ns, "/sys/class/net/eth0/queues/rx-0/rps_cpus", rps)
	c.sh(fmt.Sprintf("ip -n %s link set %s master %s up", c.h.Netns, veth, c.h.Bridge))
	return veth
}

// followed waits for the agent a to follow the container end in ns, and
// returns its state and the last read's error.
func followed(a *Agent, stages *ebpf.Map, ns, mask string) (endState, error) {
	deadline := time.Now().Add(5 * time.Second) // a hang guard
	for {
		e, err := readEnd(ns, stages, a.Host().Dir)
		// The whole state, not its first part: RPS is set last, but a
		// read that failed meanwhile would miss a part that is there.
		if err == nil && e.lacks(mask) == "" || time.Now().After(deadline) {
			return e, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkRecycled: nsB, which got nsA's inode inoA, is steered, and nothing
// of nsA is left in the journal or the kernel.
func checkRecycled(t *testing.T, a *Agent, stages *ebpf.Map, nsA, nsB string, inoA uint64, mask string) {
	t.Helper()
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
	own := ownMaps{}
	if err == nil {
		err = own.record(a.Host().PinDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := defunctLinks(ko.owned(own)); d != 0 {
		t.Errorf("%d falcon links on a vanished device (A's arrival counter not closed)", d)
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
