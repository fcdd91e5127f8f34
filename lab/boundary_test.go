package lab

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/falconnet/falcon/"

// TestProductImportsNoLab: neither the falcon binary (cmd/falcon, what the
// image ships) nor any package of internal/ (the node product and its
// leaves) depends on the lab, as go list -deps sees their non-test files
// (their tests may build testbeds with lab/testbed and lab/labtest); the
// check anyone can run is
//
//	go list -deps ./cmd/falcon ./internal/... | grep falcon/lab
func TestProductImportsNoLab(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "../cmd/falcon", "../internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), " ")
		n++
		for d := range strings.FieldsSeq(deps) {
			if strings.HasPrefix(d, module+"lab/") || d == module+"lab" {
				t.Errorf("%s depends on %s: the product must not import the lab", strings.TrimPrefix(pkg, module), strings.TrimPrefix(d, module))
			}
		}
	}
	for _, p := range []string{"cmd/falcon", "internal/agent", "internal/datapath", "internal/doctor", "internal/metrics", "internal/top"} {
		if !strings.Contains(string(out), module+p+" ") {
			t.Errorf("go list did not list %s", p)
		}
	}
	t.Logf("cmd/falcon and %d packages of internal/ checked", n-1)
}

// TestSimImportsNoBench: the model reads results files through schema,
// not through the bench that writes them.
func TestSimImportsNoBench(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "./sim").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for d := range strings.FieldsSeq(string(out)) {
		if d == module+"lab/bench" {
			t.Errorf("lab/sim (or its tests) depends on lab/bench: read results through lab/schema")
		}
	}
}
