package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOpen: a journal file of any content is a journal or an error, never
// a panic; checkPath accepts only clean absolute paths under /sys or
// /proc/sys, which Apply and Restore write to alone. (Restore itself
// writes values and is not fuzzed.)
func FuzzOpen(f *testing.F) {
	for _, s := range []string{`{"version":1,"entries":[{"netns":"","netns_ino":4026531833,"path":"/sys/class/net/eth0/queues/rx-0/rps_cpus","old":"0","new":"3"}]}`,
		`{"version":1,"entries":[{"path":"/etc/passwd"}]}`, `{"version":`, "", "null", `{"entries":[null]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file := filepath.Join(t.TempDir(), "journal.json")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := Open(file)
		if err != nil {
			return
		}
		for _, e := range j.Entries() {
			if checkPath(e.Path) != nil {
				continue
			}
			if filepath.Clean(e.Path) != e.Path || !(strings.HasPrefix(e.Path, "/sys/") || strings.HasPrefix(e.Path, "/proc/sys/")) ||
				strings.Contains(e.Path, "/../") {
				t.Fatalf("checkPath accepts %q", e.Path)
			}
		}
	})
}
