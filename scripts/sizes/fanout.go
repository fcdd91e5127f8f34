package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// maxFanOut is how many of the module's own packages one package may
// import: past that a package mixes concerns (bench once imported 16).
// Test files do not count: a test may reach for whatever it checks with.
const maxFanOut = 8

// fanOutExceptions are the packages held to no fan-out, each with why.
var fanOutExceptions = map[string]string{
	// The lab's composition root: each subcommand parses flags into one
	// package's options, calls it and prints the result, so falcon-lab
	// imports a package or two per command by design, and folding them
	// behind a facade would only hide that. (cmd/falcon, the node's, fits
	// under the limit since the lab's commands left it.)
	"cmd/falcon-lab": "the lab's CLI wires every command's package",
}

// checkFanOut lists every package of the module at root that imports
// more than maxFanOut of the module's own packages.
func checkFanOut(root string) ([]string, error) {
	imports, err := ownImports(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for pkg, deps := range imports {
		if _, ok := fanOutExceptions[pkg]; ok || len(deps) <= maxFanOut {
			continue
		}
		out = append(out, fmt.Sprintf("%s imports %d of the module's packages, more than %d: split it by concern (%s)",
			pkg, len(deps), maxFanOut, strings.Join(deps, ", ")))
	}
	sort.Strings(out)
	return out, nil
}

// ownImports maps each package of the module at root (its path inside the
// module) to the module's packages its non-test files import, as go list
// sees them for this platform.
func ownImports(root string) (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-f", "{{.Module.Path}} {{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		mod := f[0] + "/"
		pkg := strings.TrimPrefix(f[1], mod)
		deps := []string{}
		for _, im := range f[2:] {
			if dep, ok := strings.CutPrefix(im, mod); ok {
				deps = append(deps, dep)
			}
		}
		out[pkg] = deps
	}
	return out, nil
}
