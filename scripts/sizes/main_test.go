package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: a new offender and a listed one that grew fail; one that
// shrank must lower its figure, one that is fixed must leave the list.
func TestCheck(t *testing.T) {
	listed := map[string]int{"file a.go": 600, "func b.go F": 90, "func c.go G": 85, "file e.go": 510}
	found := []offender{{"file a.go", 550}, {"func b.go F", 91}, {"func d.go H", 81}, {"file e.go", 510}}
	got := strings.Join(check(found, listed), "\n")
	for _, want := range []string{"func b.go F: 91 lines, grew past the 90", "func d.go H: 81 lines, over the limit",
		"func c.go G: within the limit now (or gone): remove it", "file a.go: 550 lines, down from 600: lower the allowlist's figure to 550"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "e.go") {
		t.Errorf("e.go is as listed, yet:\n%s", got)
	}
}

// TestFuncName: methods are named Recv.Name, generic receivers too.
func TestFuncName(t *testing.T) {
	src := "package p\nfunc F() {}\nfunc (r *R) M() {}\nfunc (g G[T]) N() {}\n"
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		names = append(names, funcName(d.(*ast.FuncDecl)))
	}
	if got := strings.Join(names, ","); got != "F,R.M,G.N" {
		t.Errorf("got %s", got)
	}
}

// TestMeasureC: bpf/'s own C files, the lab's in bpf/lab/ too, are held
// to the file limit, the kernel headers vendored under bpf/include/ and C
// elsewhere are not.
func TestMeasureC(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("int x;\n", maxFileLines+1)
	for _, rel := range []string{"bpf/long.c", "bpf/long.h", "bpf/short.c", "bpf/lab/long.c", "bpf/include/asm/long.h", "tools/long.c"} {
		body := long
		if strings.Contains(rel, "short") {
			body = "int x;\n"
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, err := measure(root)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range found {
		keys = append(keys, fmt.Sprintf("%s %d", o.key, o.lines))
	}
	want := fmt.Sprintf("file bpf/lab/long.c %d,file bpf/long.c %d,file bpf/long.h %d", maxFileLines+1, maxFileLines+1, maxFileLines+1)
	if got := strings.Join(keys, ","); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
