package roottest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneGate: no test of the module asks for root but through this
// package, so that -short skips every root test (a test that read
// os.Geteuid itself would run as root under -short).
func TestOneGate(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "--", "*_test.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	n := 0
	for f := range strings.FieldsSeq(string(out)) {
		if filepath.Dir(f) == "lab/roottest" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		n++
		if strings.Contains(string(b), "os.Geteuid()") {
			t.Errorf("%s reads os.Geteuid(): gate it with roottest.Need or roottest.May", f)
		}
	}
	if n < 50 {
		t.Errorf("only %d test files listed: the lint looked in the wrong place", n)
	}
}
