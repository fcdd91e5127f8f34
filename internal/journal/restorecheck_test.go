package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/netns"
)

// A journal file is checked on restore as each change was when it was
// recorded: an entry for a path outside /sys and /proc/sys (an edited or
// forged file) is written nowhere, reported, and dropped, and the rest is
// restored.
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
	if err == nil || !strings.Contains(err.Error(), "not a clean path under /sys or /proc/sys") {
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
