package main

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// maxFanOut is how many of the module's own packages one package may
// import: past that a package mixes concerns (bench once imported 16).
// Test files do not count: a test may reach for whatever it checks with.
const maxFanOut = 8

// fanOutExceptions are the packages held to no fan-out, each with why.
var fanOutExceptions = map[string]string{
	// The composition root: each subcommand parses flags into one
	// package's options, calls it and prints the result, so the CLI
	// imports one package per command by design, and folding them
	// behind a facade would only hide that.
	"cmd/falcon": "the CLI wires every command's package",
	// The node agent composes the product's mechanisms (datapath,
	// journal, discovery, load sampling, the cause policy) and parses
	// the mode catalogue; at 10 until the catalogue's syntax leaves it
	// (issue 33: one mode parser, Options grouped by mechanism).
	"internal/agent": "the agent composes the product's mechanisms; the catalogue's syntax is to leave it",
}

// checkFanOut lists every package of the module at root that imports
// more than maxFanOut of the module's own packages.
func checkFanOut(root string) ([]string, error) {
	mod, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	imports, err := ownImports(root, mod)
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

// ownImports maps each package directory (relative to root) to the
// module's packages its non-test files import, sorted.
func ownImports(root, mod string) (map[string][]string, error) {
	sets := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		if sets[pkg] == nil {
			sets[pkg] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if dep, ok := strings.CutPrefix(p, mod+"/"); ok {
				sets[pkg][dep] = true
			}
		}
		return nil
	})
	out := map[string][]string{}
	for pkg, set := range sets {
		deps := []string{}
		for d := range set {
			deps = append(deps, d)
		}
		sort.Strings(deps)
		out[pkg] = deps
	}
	return out, err
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}
