// Command guesttests prints the tests make test-guest runs in the 6.1
// kernel guest, as scripts/kernels/run.sh's KERNEL_TESTS: each package
// with a test whose doc comment has a line
//
//	// guest: <why it must run on the old kernel>
//
// and those tests, "dir:^(TestA|TestB)$ ...", packages sorted by their
// directory. The test carries its own selection, so renaming, moving or
// adding one needs no list kept elsewhere. A marker anywhere but in a
// top-level test function's doc comment, or without a reason, is an
// error: it would select nothing.
//
//	go run ./scripts/guesttests [ROOT]    # ROOT: the module's root, default .
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// marker starts a guest marker's comment line.
const marker = "// guest:"

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	sel, err := scan(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guesttests:", err)
		os.Exit(1)
	}
	if len(sel) == 0 {
		fmt.Fprintln(os.Stderr, "guesttests: no test under", root, "is marked", marker)
		os.Exit(1)
	}
	fmt.Println(format(sel))
}

// scan returns the marked tests under root, by package directory (slash
// separated, relative to root). Dot, underscore and testdata directories
// and nested modules are not the module's packages, and are skipped.
func scan(root string) (map[string][]string, error) {
	sel := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		tests, err := marked(fset, path)
		if err != nil || len(tests) == 0 {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		sel[dir] = append(sel[dir], tests...)
		return nil
	})
	return sel, err
}

// marked lists the tests of one file whose doc comment has a marker.
func marked(fset *token.FileSet, path string) ([]string, error) {
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	onTest := map[*ast.Comment]bool{}
	var tests []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Doc == nil || !isTest(fn) {
			continue
		}
		for _, c := range fn.Doc.List {
			if strings.HasPrefix(c.Text, marker) {
				onTest[c] = true
				if !slices.Contains(tests, fn.Name.Name) {
					tests = append(tests, fn.Name.Name)
				}
			}
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if !strings.HasPrefix(c.Text, marker) {
				continue
			}
			pos := fset.Position(c.Pos())
			switch {
			case !onTest[c]:
				return nil, fmt.Errorf("%s: %q is not in a test function's doc comment", pos, c.Text)
			case strings.TrimSpace(strings.TrimPrefix(c.Text, marker)) == "":
				return nil, fmt.Errorf("%s: %q says no reason", pos, c.Text)
			}
		}
	}
	return tests, nil
}

// isTest says whether fn is a top-level test go test runs: TestXxx(t *testing.T).
func isTest(fn *ast.FuncDecl) bool {
	name := fn.Name.Name
	if fn.Recv != nil || !strings.HasPrefix(name, "Test") || name == "TestMain" {
		return false
	}
	if rest := name[len("Test"):]; rest != "" && rest[0] >= 'a' && rest[0] <= 'z' {
		return false
	}
	p := fn.Type.Params.List
	if len(p) != 1 || len(p[0].Names) > 1 {
		return false
	}
	star, ok := p[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

// format writes the selection as KERNEL_TESTS takes it.
func format(sel map[string][]string) string {
	var dirs []string
	for d := range sel {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var out []string
	for _, d := range dirs {
		tests := append([]string(nil), sel[d]...)
		sort.Strings(tests)
		out = append(out, d+":^("+strings.Join(tests, "|")+")$")
	}
	return strings.Join(out, " ")
}
