package journal

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzOpen: a journal file of any content is a journal or an error, never
// a panic; checkPath accepts only the values falcon changes (values.go),
// which Apply and Restore write to alone. (Restore itself writes values and
// is not fuzzed.)
func FuzzOpen(f *testing.F) {
	for _, s := range []string{`{"version":1,"entries":[{"netns":"","netns_ino":4026531833,"path":"/sys/class/net/eth0/queues/rx-0/rps_cpus","old":"0","new":"3"}]}`,
		`{"version":1,"entries":[{"path":"/etc/passwd"}]}`, `{"version":1,"entries":[{"path":"/proc/sys/kernel/core_pattern"}]}`, `{"version":`, "", "null", `{"entries":[null]}`} {
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
			if e.Path != SockFlowEntries && (filepath.Clean(e.Path) != e.Path || !strings.HasPrefix(e.Path, "/sys/class/net/") ||
				!slices.Contains(queueAttrs, filepath.Base(e.Path)) || filepath.Base(filepath.Dir(filepath.Dir(e.Path))) != "queues") {
				t.Fatalf("checkPath accepts %q", e.Path)
			}
		}
	})
}
