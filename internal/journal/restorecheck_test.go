package journal

import (
	"errors"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/netns"
)

// A journal file is checked on restore as each change was when it was
// recorded: an entry for a path that is not a value falcon changes (an
// edited or forged file) is written nowhere, reported, and dropped, and the
// rest is restored.
func TestRestoreChecksPaths(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "journal.json")
	ino, err := netns.Inode("")
	if err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	for _, p := range []string{victim, "/sys/../" + victim, "sys/x", "/proc/sys/../../" + victim} {
		entries = append(entries, Entry{NetnsIno: ino, Path: p, Old: "overwritten", New: "x"})
	}
	if err := fileutil.WriteJSON(file, fileFormat{Version: 1, Entries: entries}, 0o600); err != nil {
		t.Fatal(err)
	}
	err = Restore(file)
	if !errors.Is(err, ErrRefused) {
		t.Errorf("Restore: %v; want the bad paths refused", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Errorf("%s now holds %q", victim, b)
	}
	if j, err := Open(file); err != nil || len(j.Entries()) != 0 {
		t.Errorf("after the restore: %v, %+v; want the refused entries dropped", err, j.Entries())
	}
}

// A file left where a namespace was bind-mounted (a runtime that unmounted
// it and did not remove the file) means the namespace is gone there: its
// values are dropped, and the restore does not fail on them.
func TestRestoreAfterNetnsLeftAFile(t *testing.T) {
	ns, _ := setup(t)
	file := filepath.Join(t.TempDir(), "journal.json")
	j, _ := Open(file)
	if err := j.Apply(ns, []Change{{ctrRPS, "1"}}); err != nil {
		t.Fatal(err)
	}
	ip(t, "netns", "del", ns)
	left := filepath.Join(netns.Dir, ns)
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(left)
	if err := j.Restore(); err != nil {
		t.Errorf("Restore: %v", err)
	}
	if n := len(j.Entries()); n != 0 {
		t.Errorf("%d entries left: %+v", n, j.Entries())
	}
}

// A journal naming /proc/sys/kernel/core_pattern (which would make the
// kernel run a program of the planter's choosing, as root) is refused by
// name, and core_pattern is left as it was. The test reruns itself in a
// private mount namespace where core_pattern is a file of its own, bound
// over the real one, so that a restore that wrongly writes it harms nothing.
func TestRestoreRefusesCorePattern(t *testing.T) {
	roottest.Need(t)
	const corePattern, was = "/proc/sys/kernel/core_pattern", "falcon-test-untouched"
	if stand := os.Getenv("FALCON_CORE_PATTERN"); stand == "" {
		stand = filepath.Join(t.TempDir(), "core_pattern")
		if err := os.WriteFile(stand, []byte(was+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		script := `mount --bind "$1" ` + corePattern + ` && exec "$0" -test.run '^TestRestoreRefusesCorePattern$' -test.v`
		cmd := exec.Command("unshare", "--mount", "--propagation", "slave", "sh", "-c", script, os.Args[0], stand)
		cmd.Env = append(os.Environ(), "FALCON_CORE_PATTERN="+stand)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestRestoreRefusesCorePattern") {
			t.Fatalf("%v\n%s", err, out)
		}
		if b, _ := os.ReadFile(stand); strings.TrimSpace(string(b)) != was {
			t.Errorf("core_pattern now holds %q", b)
		}
		return
	}
	if v, err := readValue(corePattern); err != nil || v != was {
		t.Fatalf("%s is %q (%v), not the test's own file: not restoring into it", corePattern, v, err)
	}
	ino, err := netns.Inode("")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "journal.json")
	planted := []Entry{{NetnsIno: ino, Path: corePattern, Old: "|/tmp/evil %p", New: "core"}}
	if err := fileutil.WriteJSON(file, fileFormat{Version: 1, Entries: planted}, 0o600); err != nil {
		t.Fatal(err)
	}
	err = Restore(file)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), corePattern) {
		t.Errorf("Restore: %v; want %s refused by name", err, corePattern)
	}
	if v, _ := readValue(corePattern); v != was {
		t.Errorf("core_pattern is %q after the restore, want %q", v, was)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the refused entry is still in the journal (%v)", err)
	}
}

// checkPath accepts exactly the values falcon changes.
func TestCheckPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"/sys/class/net/eth0/queues/rx-0/rps_cpus":         true,
		"/sys/class/net/vxlan.1/queues/rx-12/rps_flow_cnt": true,
		SockFlowEntries:                                    true,
		"/proc/sys/kernel/core_pattern":                    false,
		"/proc/sys/net/ipv4/conf/eth0/forwarding":          false,
		"/sys/class/net/eth0/queues/tx-0/xps_cpus":         false,
		"/sys/class/net/eth0/queues/rx-0/rps_cpus/x":       false,
		"/sys/class/net/eth0/queues/rx-/rps_cpus":          false,
		"/sys/class/net/eth0/queues/rx-0x/rps_cpus":        false,
		"/sys/class/net/../queues/rx-0/rps_cpus":           false,
		"/sys/class/net/eth0/../eth0/queues/rx-0/rps_cpus": false,
		"/sys/class/net//queues/rx-0/rps_cpus":             false,
		"/sys/class/net/eth0/mtu":                          false,
		"/sys/kernel/mm/transparent_hugepage/enabled":      false,
		"/proc/sys/net/core/rps_sock_flow_entries/":        false,
		"/proc/sys/net/core/../core/rps_sock_flow_entries": false,
	} {
		if err := checkPath(p); (err == nil) != ok {
			t.Errorf("checkPath(%q) = %v, want accepted %v", p, err, ok)
		}
	}
}
