package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFanOut: a package importing 9 of the module's packages fails, one
// importing 8 (and the standard library besides) passes; test files
// do not count, and the CLI is held to no fan-out.
func TestFanOut(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	importing := func(pkg string, n int, extra ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\nimport (\n", pkg)
		for i := range n {
			fmt.Fprintf(&b, "\t_ \"example.com/m/leaf/l%d\"\n", i)
		}
		for _, e := range extra {
			fmt.Fprintf(&b, "\t_ %q\n", e)
		}
		b.WriteString(")\n")
		return b.String()
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	for i := range 10 {
		write(fmt.Sprintf("leaf/l%d/l.go", i), fmt.Sprintf("package l%d\n", i))
	}
	write("wide/w.go", importing("wide", 9))
	write("eight/e.go", importing("eight", 8, "fmt", "os"))
	write("eight/e_test.go", importing("eight", 10))
	write("cmd/falcon-lab/main.go", importing("main", 10))
	got, err := checkFanOut(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "wide imports 9 of the module's packages, more than 8") ||
		!strings.Contains(got[0], "leaf/l0, leaf/l1") {
		t.Errorf("got %q, want wide alone", got)
	}
}
