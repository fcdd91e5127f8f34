package scripts

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/lab/bench"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// pairs reads a script's shell lists: name="cmd:pkg cmd:pkg ..." for
// setup.sh's NAME_pkgs, name=(pkg pkg:cmd ...) for the bundle's tools, as
// command -> package.
func pairs(t *testing.T, script string, re *regexp.Regexp, cmdFirst bool) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		list := map[string]string{}
		for _, p := range strings.Fields(m[2]) {
			a, b, ok := strings.Cut(p, ":")
			switch {
			case !ok:
				list[a] = a
			case cmdFirst:
				list[a] = b
			default:
				list[b] = a
			}
		}
		out[m[1]] = list
	}
	return out
}

// TestScriptsInstallEveryWorkloadsTools: setup.sh --bench and the bundle
// install every tool a workload of the catalogue starts, from the package
// the bench's own "not found" error names.
func TestScriptsInstallEveryWorkloadsTools(t *testing.T) {
	setup := pairs(t, "setup.sh", regexp.MustCompile(`(?m)^(\w+)_pkgs="([^"]*)"`), true)
	bundle := pairs(t, "bundle/build.sh", regexp.MustCompile(`(?m)^(tools)=\(([^)]*)\)`), false)["tools"]
	if setup["demo"] == nil || setup["bench"] == nil || bundle == nil {
		t.Fatalf("no demo_pkgs, bench_pkgs (setup.sh) or tools (bundle/build.sh): %v, %v", setup, bundle)
	}
	n := 0
	for _, w := range workload.All() {
		for _, tool := range w.Tools() {
			n++
			want := workload.Package(tool)
			pkg, ok := setup["demo"][tool]
			if !ok {
				pkg, ok = setup["bench"][tool]
			}
			if !ok || pkg != want {
				t.Errorf("workload %s: setup.sh --bench installs %s from %q, want %s", w.Name, tool, pkg, want)
			}
			if pkg := bundle[tool]; pkg != want {
				t.Errorf("workload %s: the bundle takes %s from %q, want %s", w.Name, tool, pkg, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("the catalogue names no tools")
	}
}

// TestSetupInstallsTheDemoModesTools: setup.sh alone installs the commands
// the agents of the demo's modes run (the fast path's nft: a fresh machine's
// demo failed every fastpath run without it).
func TestSetupInstallsTheDemoModesTools(t *testing.T) {
	demo := pairs(t, "setup.sh", regexp.MustCompile(`(?m)^(\w+)_pkgs="([^"]*)"`), true)["demo"]
	modes := bench.PresetModes("demo")
	if len(modes) == 0 {
		t.Fatal("the demo preset names no modes")
	}
	for _, spec := range modes {
		m, err := schema.ParseMode(spec)
		if err != nil {
			t.Fatalf("demo mode %s: %v", spec, err)
		}
		for tool, want := range agent.Tools(m.Opts) {
			if pkg := demo[tool]; pkg != want {
				t.Errorf("demo mode %s runs %s: setup.sh installs it from %q, want %s", spec, tool, pkg, want)
			}
		}
	}
}

// TestBundleCarriesEveryModesTools: the bundle carries the commands the
// agents of every mode run (without nft every fastpath run on a machine
// that has none failed).
func TestBundleCarriesEveryModesTools(t *testing.T) {
	bundle := pairs(t, "bundle/build.sh", regexp.MustCompile(`(?m)^(tools)=\(([^)]*)\)`), false)["tools"]
	for _, name := range agent.ModeNames() {
		o := agent.DefaultOptions()
		if err := agent.ParseMode(name, &o); err != nil {
			t.Fatalf("mode %s: %v", name, err)
		}
		for tool, want := range agent.Tools(o) {
			if pkg := bundle[tool]; pkg != want {
				t.Errorf("mode %s runs %s: the bundle takes it from %q, want %s", name, tool, pkg, want)
			}
		}
	}
}
