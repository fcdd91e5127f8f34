package main

import (
	"go/ast"
	"go/parser"
	"go/token"
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
