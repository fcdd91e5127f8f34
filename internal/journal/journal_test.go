package journal

import (
	"fmt"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// setup makes a namespace with a veth pair between it and the current
// namespace and returns the namespace name and the host-side device.
func setup(t *testing.T) (ns, host string) {
	t.Helper()
	roottest.Need(t)
	ns = fmt.Sprintf("fct%dj", os.Getpid())
	host = fmt.Sprintf("fct%dh", os.Getpid())
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", host).Run()
		exec.Command("ip", "netns", "del", ns).Run()
	})
	ip(t, "netns", "add", ns)
	ip(t, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
	return ns, host
}

func read(t *testing.T, ns, path string) string {
	t.Helper()
	var v string
	err := netns.WithSysfs(ns, func(string) error {
		var err error
		v, err = readValue(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const (
	ctrRPS  = "/sys/class/net/eth0/queues/rx-0/rps_cpus"
	ctrFlow = "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"
)

func TestApplyRestore(t *testing.T) {
	ns, host := setup(t)
	hostRPS := "/sys/class/net/" + host + "/queues/rx-0/rps_cpus"
	hostFlow := "/sys/class/net/" + host + "/queues/rx-0/rps_flow_cnt"
	// Start from values that are not the defaults, so that restoring to the
	// defaults by mistake would be seen.
	j0, _ := Open(filepath.Join(t.TempDir(), "pre"))
	if err := j0.Apply(ns, []Change{{ctrFlow, "16"}}); err != nil {
		t.Fatal(err)
	}
	if err := j0.Apply("", []Change{{hostRPS, "1"}}); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{
		"c" + ctrRPS: read(t, ns, ctrRPS), "c" + ctrFlow: read(t, ns, ctrFlow),
		"h" + hostRPS: read(t, "", hostRPS), "h" + hostFlow: read(t, "", hostFlow),
	}

	file := filepath.Join(t.TempDir(), "journal.json")
	j, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // twice: the second apply must not lose the old values
		if err := j.Apply(ns, []Change{{ctrRPS, "2"}, {ctrFlow, "0"}}); err != nil {
			t.Fatal(err)
		}
		if err := j.Apply("", []Change{{hostRPS, "3"}, {hostFlow, "0"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, ns, ctrRPS); got != "2" {
		t.Errorf("container rps_cpus = %q, want 2", got)
	}
	if got := read(t, ns, ctrFlow); got != "0" {
		t.Errorf("container rps_flow_cnt = %q, want 0", got)
	}
	if got := read(t, "", hostRPS); got != "3" {
		t.Errorf("host rps_cpus = %q, want 3", got)
	}
	// hostFlow was already 0: nothing to record.
	if n := len(j.Entries()); n != 3 {
		t.Errorf("journal has %d entries, want 3: %+v", n, j.Entries())
	}

	// A new process restores from the file alone.
	if err := Restore(file); err != nil {
		t.Fatal(err)
	}
	after := map[string]string{
		"c" + ctrRPS: read(t, ns, ctrRPS), "c" + ctrFlow: read(t, ns, ctrFlow),
		"h" + hostRPS: read(t, "", hostRPS), "h" + hostFlow: read(t, "", hostFlow),
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s restored to %q, was %q", k[1:], after[k], v)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("journal file left behind after restore: %v", err)
	}
	if err := Restore(file); err != nil {
		t.Errorf("second restore: %v", err)
	}
	if err := j0.Restore(); err != nil {
		t.Fatal(err)
	}
}

// TestCrash restores after a crash between recording and writing, and after
// a crash half-way through the changes.
func TestCrash(t *testing.T) {
	ns, host := setup(t)
	hostRPS := "/sys/class/net/" + host + "/queues/rx-0/rps_cpus"
	file := filepath.Join(t.TempDir(), "journal.json")

	j, _ := Open(file)
	if err := j.Apply("", []Change{{hostRPS, "3"}}); err != nil {
		t.Fatal(err)
	}
	// The crash: the old value was recorded, the new one never written.
	ino, err := netns.Inode(ns)
	if err != nil {
		t.Fatal(err)
	}
	j.entries = append(j.entries, Entry{Netns: ns, NetnsIno: ino, Path: ctrRPS, Old: "0", New: "1"})
	if err := j.save(); err != nil {
		t.Fatal(err)
	}

	if err := Restore(file); err != nil {
		t.Fatal(err)
	}
	if got := read(t, "", hostRPS); got != "0" {
		t.Errorf("host rps_cpus = %q after restore, want 0", got)
	}
	if got := read(t, ns, ctrRPS); got != "0" {
		t.Errorf("container rps_cpus = %q after restore, want 0", got)
	}
}

// TestGone drops values whose device or namespace disappeared, and never
// writes into a namespace that merely reuses the recorded name.
func TestGone(t *testing.T) {
	ns, host := setup(t)
	file := filepath.Join(t.TempDir(), "journal.json")
	j, _ := Open(file)
	if err := j.Apply(ns, []Change{{ctrRPS, "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Apply("", []Change{{"/sys/class/net/" + host + "/queues/rx-0/rps_cpus", "1"}}); err != nil {
		t.Fatal(err)
	}
	ip(t, "link", "del", host) // takes the container's eth0 with it
	// The device is gone, its namespace not yet (a runtime deletes the
	// container's end first): nothing is left to restore.
	if err := j.Prune(); err != nil {
		t.Fatal(err)
	}
	if n := len(j.Entries()); n != 1 {
		t.Errorf("Prune left %d entries with the container's device gone, want the host's 1: %+v", n, j.Entries())
	}
	ip(t, "netns", "del", ns)
	if err := j.Prune(); err != nil {
		t.Fatal(err)
	}
	if n := len(j.Entries()); n != 1 {
		t.Errorf("Prune left %d entries, want the host's 1: %+v", n, j.Entries())
	}
	ip(t, "netns", "add", ns)
	ip(t, "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if n := len(j.Entries()); n != 0 {
		t.Errorf("%d entries left: %+v", n, j.Entries())
	}
	if got := read(t, ns, ctrRPS); got != "0" {
		t.Errorf("a new namespace of the same name got rps_cpus %q", got)
	}
}

func TestBadPath(t *testing.T) {
	j, _ := Open(filepath.Join(t.TempDir(), "j"))
	for _, p := range []string{"/etc/passwd", "sys/x", "/sys/../etc/x", "/proc/sys/kernel/core_pattern"} {
		if err := j.Apply("", []Change{{p, "1"}}); err == nil {
			t.Errorf("Apply(%q) succeeded", p)
		}
	}
}

// TestReadOnlyMounts reruns TestApplyRestore where /sys and /proc/sys are
// mounted read-only, as in an unprivileged Kubernetes pod.
func TestReadOnlyMounts(t *testing.T) {
	roottest.Need(t)
	if os.Getenv("FALCON_JOURNAL_RO") != "" {
		t.Skip("already inside")
	}
	script := `mount -o remount,bind,ro /sys && mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys &&
! touch /sys/class/net/lo/queues/rx-0/rps_cpus 2>/dev/null && exec "$0" -test.run '^TestApplyRestore$' -test.v`
	cmd := exec.Command("unshare", "--mount", "--propagation", "slave", "sh", "-c", script, os.Args[0])
	cmd.Env = append(os.Environ(), "FALCON_JOURNAL_RO=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestApplyRestore") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestMovedNetns restores into a namespace whose recorded path is gone but
// which lives on under another (the container's first process exited).
func TestMovedNetns(t *testing.T) {
	ns, _ := setup(t)
	file := filepath.Join(t.TempDir(), "journal.json")
	j, _ := Open(file)
	if err := j.Apply(ns, []Change{{ctrRPS, "1"}}); err != nil {
		t.Fatal(err)
	}
	// Keep the namespace alive through a process only, then drop its name.
	cmd := exec.Command("ip", "netns", "exec", ns, "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ino, _ := netns.Inode(ns)
	for i := 0; i < 500; i++ { // until ip has entered the namespace and exec'd sleep
		if got, _ := netns.Inode(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)); got == ino {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ip(t, "netns", "del", ns)
	proc := fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, proc, ctrRPS); got != "0" {
		t.Errorf("rps_cpus %q after restore through %s, want 0", got, proc)
	}
}

// TestRecycledInode: the kernel gives a new namespace the inode of one
// destroyed before (nsfs inodes come from proc's lowest-free allocator), as
// container churn does all the time. The gone namespace's entries must
// not stand for the new one's values (Apply), nor be written into it
// (Restore), nor be kept alive by it (Prune).
func TestRecycledInode(t *testing.T) {
	for _, prune := range []bool{false, true} {
		t.Run(fmt.Sprintf("prune=%v", prune), func(t *testing.T) {
			a, host := setup(t)
			j, _ := Open(filepath.Join(t.TempDir(), "journal.json"))
			if err := j.Apply(a, []Change{{ctrRPS, "1"}}); err != nil { // a's own value was 0
				t.Fatal(err)
			}
			ino, err := netns.Inode(a)
			if err != nil {
				t.Fatal(err)
			}
			ip(t, "link", "del", host)
			ip(t, "netns", "del", a)
			b := recycle(t, ino, fmt.Sprintf("fct%dr", os.Getpid()))
			ip(t, "-n", b, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
			if err := netns.WithSysfs(b, func(string) error { return writeValue(ctrRPS, "1") }); err != nil {
				t.Fatal(err)
			}
			if prune {
				if err := j.Prune(); err != nil {
					t.Fatal(err)
				}
				if n := len(j.Entries()); n != 0 {
					t.Errorf("Prune kept %d entries of the gone namespace: %+v", n, j.Entries())
				}
			}
			if err := j.Apply(b, []Change{{ctrRPS, "0"}}); err != nil { // b's own value is 1
				t.Fatal(err)
			}
			var own int
			for _, e := range j.Entries() {
				if e.Netns == b && e.Old == "1" {
					own++
				}
			}
			if own != 1 {
				t.Errorf("the new namespace's value is not recorded as its own: %+v", j.Entries())
			}
			if err := j.Restore(); err != nil {
				t.Fatal(err)
			}
			if got := read(t, b, ctrRPS); got != "1" {
				t.Errorf("the new namespace's rps_cpus = %q after restore, want its own 1 (the gone one's was 0)", got)
			}
			if n := len(j.Entries()); n != 0 {
				t.Errorf("%d entries left: %+v", n, j.Entries())
			}
		})
	}
}

// recycle makes namespaces named prefix<k> until one gets inode ino, of a
// namespace just removed, and returns its name; it skips the test if none
// does within 10 s. The kernel hands out the lowest free inode, so probes
// that got a lower one are kept (using up the lower ones freed meanwhile)
// and the others removed again; every probe goes when the test ends.
func recycle(t *testing.T, ino uint64, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for k := 0; time.Now().Before(deadline); k++ {
		ns := fmt.Sprintf("%s%d", prefix, k)
		ip(t, "netns", "add", ns)
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

// TestRestoreWhere restores the entries accepted and leaves the others
// recorded and in force, for a later Restore.
func TestRestoreWhere(t *testing.T) {
	ns, host := setup(t)
	hostRPS := "/sys/class/net/" + host + "/queues/rx-0/rps_cpus"
	file := filepath.Join(t.TempDir(), "journal.json")
	j, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Apply(ns, []Change{{ctrRPS, "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Apply("", []Change{{hostRPS, "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.RestoreWhere(func(e Entry) bool { return e.Device() == host }); err != nil {
		t.Fatal(err)
	}
	if got := read(t, "", hostRPS); got != "0" {
		t.Errorf("host rps_cpus = %q after its restore, want 0", got)
	}
	if got := read(t, ns, ctrRPS); got != "2" {
		t.Errorf("container rps_cpus = %q, want 2 still: it was not to be restored", got)
	}
	if es := j.Entries(); len(es) != 1 || es[0].Device() != "eth0" {
		t.Errorf("entries left: %+v, want the container's alone", es)
	}
	if err := Restore(file); err != nil {
		t.Fatal(err)
	}
	if got := read(t, ns, ctrRPS); got != "0" {
		t.Errorf("container rps_cpus = %q after the last restore, want 0", got)
	}
	if d := (Entry{Path: SockFlowEntries}).Device(); d != "" {
		t.Errorf("the global table's entry names device %q", d)
	}
}
