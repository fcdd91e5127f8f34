// Package kubernetes holds falcon's Kubernetes manifests. No cluster runs
// here, so its tests check them against the Kubernetes API schemas offline
// (validate.sh) and against falcon's own rules for the agent's pod.
package kubernetes

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// validatorMissing is validate.sh's exit status when the validator is not
// installed and cannot be.
const validatorMissing = 3

var install struct {
	once sync.Once
	out  []byte
	err  error
}

// validator returns the path of validate.sh once the validator is installed
// (validate.sh installs it on first use, tried once per test run). Only a
// validator that cannot be installed skips the test, and not in CI, where
// scripts/setup.sh --test installs it.
func validator(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("validate.sh")
	if err != nil {
		t.Fatal(err)
	}
	install.once.Do(func() {
		install.out, install.err = exec.Command(script, "--install").CombinedOutput()
	})
	var ee *exec.ExitError
	if errors.As(install.err, &ee) && ee.ExitCode() == validatorMissing && os.Getenv("CI") == "" {
		t.Skipf("Kubernetes schema validator not installed and cannot be installed here:\n%s"+
			"run scripts/setup.sh --test (or %s --install) once with access to PyPI", install.out, script)
	}
	if install.err != nil {
		t.Fatalf("%s --install: %v\n%s", script, install.err, install.out)
	}
	return script
}

func TestManifestsMatchKubernetesSchemas(t *testing.T) {
	script := validator(t)
	out, err := exec.Command(script).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("manifests do not match the Kubernetes API schemas: %v", err)
	}
}

// A validator that passes everything would make the test above worthless.
func TestValidatorRejectsBrokenManifests(t *testing.T) {
	script := validator(t)
	orig, err := os.ReadFile("10-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"unknown field", "privileged: false", "privilegd: false", "'privilegd' was unexpected"},
		{"wrong type", "terminationGracePeriodSeconds: 60", `terminationGracePeriodSeconds: "60s"`, "is not of type 'integer'"},
		{"unknown kind", "kind: DaemonSet", "kind: DaemonSets", "Couldn't find schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := strings.Replace(string(orig), c.from, c.to, 1)
			if broken == string(orig) {
				t.Fatalf("10-daemonset.yaml has no %q to break", c.from)
			}
			f := filepath.Join(t.TempDir(), "broken.yaml")
			if err := os.WriteFile(f, []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(script, f).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("validator accepted a manifest with %s (err %v):\n%s", c.name, err, out)
			}
		})
	}
}

// manifest is one YAML document of the manifests, as validate.sh --json
// prints it (parsed by the validator's own YAML library).
type manifest struct {
	File string `json:"file"`
	Doc  object `json:"doc"`
}

type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
	Spec json.RawMessage   `json:"spec"`
}

func loadManifests(t *testing.T) []manifest {
	t.Helper()
	script := validator(t)
	out, err := exec.Command(script, "--json").Output()
	if err != nil {
		t.Fatalf("%s --json: %v", script, err)
	}
	var ms []manifest
	if err := json.Unmarshal(out, &ms); err != nil {
		t.Fatalf("decode manifests: %v", err)
	}
	return ms
}
