package agent

import (
	"errors"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/journal"
)

// A hold file naming /proc/sys/kernel/core_pattern (planted: falcon holds
// only the values it changes) is refused by name on release, and
// core_pattern is left as it was. The test reruns itself in a private mount
// namespace where core_pattern is a file of its own bound over the real
// one, and with the hold file in a directory of its own, so that a release
// that wrongly writes harms nothing.
func TestReleaseGlobalRefusesCorePattern(t *testing.T) {
	roottest.Need(t)
	const corePattern, was = "/proc/sys/kernel/core_pattern", "falcon-test-untouched"
	if stand := os.Getenv("FALCON_CORE_PATTERN"); stand == "" {
		stand = filepath.Join(t.TempDir(), "core_pattern")
		if err := os.WriteFile(stand, []byte(was+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		script := `mount --bind "$1" ` + corePattern + ` && exec "$0" -test.run '^TestReleaseGlobalRefusesCorePattern$' -test.v`
		cmd := exec.Command("unshare", "--mount", "--propagation", "slave", "sh", "-c", script, os.Args[0], stand)
		cmd.Env = append(os.Environ(), "FALCON_CORE_PATTERN="+stand)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestReleaseGlobalRefusesCorePattern") {
			t.Fatalf("%v\n%s", err, out)
		}
		if b, _ := os.ReadFile(stand); strings.TrimSpace(string(b)) != was {
			t.Errorf("core_pattern now holds %q", b)
		}
		return
	}
	if b, err := os.ReadFile(corePattern); err != nil || strings.TrimSpace(string(b)) != was {
		t.Fatalf("%s is %q (%v), not the test's own file: not releasing into it", corePattern, b, err)
	}
	dir := t.TempDir()
	globalFile, globalLock = filepath.Join(dir, "global.json"), filepath.Join(dir, "global.lock")
	planted := []globalHold{{Path: corePattern, Old: "|/tmp/evil %p", Value: "core"}}
	if err := fileutil.WriteJSON(globalFile, planted, 0o600); err != nil {
		t.Fatal(err)
	}
	err := releaseGlobal(filepath.Join(dir, "agent"))
	if !errors.Is(err, journal.ErrRefused) || !strings.Contains(err.Error(), corePattern) {
		t.Errorf("releaseGlobal: %v; want %s refused by name", err, corePattern)
	}
	if b, _ := os.ReadFile(corePattern); strings.TrimSpace(string(b)) != was {
		t.Errorf("core_pattern is %q after the release, want %q", b, was)
	}
	noPath(t, globalFile)
}
