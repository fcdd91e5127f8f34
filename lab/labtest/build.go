package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/falconnet/falcon/lab/testbed"
)

const module = "github.com/falconnet/falcon/"

// builds holds the binaries Build made in this test process, by package.
var builds struct {
	sync.Mutex
	dir  string
	bins map[string]*built
}

type built struct {
	once sync.Once
	bin  string
	err  error
}

// Build builds the module's command pkg ("cmd/falcon") and returns the
// binary: a test runs the real one where a test binary will not do (enable
// starts 'falcon agent' from its own executable; the bundle ships them).
// Each command is built once per test process and shared: a build per test
// cost each one a link, about a minute each in the 6.1 guest under TCG.
// The process's TestMain removes them with RemoveBuilds.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go toolchain to build " + pkg + " with")
		}
	}
	builds.Lock()
	if builds.bins == nil {
		builds.bins = map[string]*built{}
	}
	b := builds.bins[pkg]
	if b == nil {
		b = &built{}
		builds.bins[pkg] = b
	}
	builds.Unlock()
	b.once.Do(func() {
		builds.Lock()
		if builds.dir == "" {
			builds.dir, b.err = os.MkdirTemp("", "falcon-cli-test-")
		}
		dir := builds.dir
		builds.Unlock()
		if b.err != nil {
			return
		}
		bin := filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command(gobin, "build", "-o", bin, module+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
			return
		}
		b.bin = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// RemoveBuilds removes what Build made; TestMain calls it after the tests.
func RemoveBuilds() {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
}

// TestbedLeft lists the namespaces that testbed name left.
func TestbedLeft(t testing.TB, name string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("/run/netns", testbed.Prefix+name+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
