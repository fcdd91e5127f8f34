// Command sizes holds the code to the project's sizes: no hand-written
// file over 500 lines, no Go function over 80 (generated files, such as
// bpf2go's *_bpfel.go, are left out). The BPF C in bpf/ is held to the
// file limit only (bpf/include/ is vendored kernel headers). The offenders of today are listed in
// an allowlist, each with its size, that may only shrink: a new offender,
// or a listed one that grew, fails; a listed one that shrank must have its
// figure lowered, and one that is fixed must leave the list. No package
// may import more than 8 of the module's own packages (fanout.go); that
// has no allowlist.
//
//	go run ./scripts/sizes            # check (make lint)
//	go run ./scripts/sizes -report    # every offender, worst first
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const (
	maxFileLines = 500
	maxFuncLines = 80
)

// offender is a file or a function over its size: "file PATH" or
// "func PATH NAME" (NAME as Recv.Method for methods).
type offender struct {
	key   string
	lines int
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

func main() {
	root := flag.String("root", ".", "the repository")
	allow := flag.String("allow", "scripts/sizes/allow.txt", "the allowlist, relative to -root")
	report := flag.Bool("report", false, "list every offender, worst first, and check nothing")
	flag.Parse()
	found, err := measure(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizes:", err)
		os.Exit(2)
	}
	if *report {
		sort.SliceStable(found, func(i, j int) bool { return found[i].lines > found[j].lines })
		for _, o := range found {
			fmt.Printf("%5d  %s\n", o.lines, o.key)
		}
		return
	}
	listed, err := readAllow(filepath.Join(*root, *allow))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizes:", err)
		os.Exit(2)
	}
	problems := check(found, listed)
	fan, err := checkFanOut(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizes:", err)
		os.Exit(2)
	}
	problems = append(problems, fan...)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "sizes: files up to %d lines, functions up to %d; %s lists today's offenders, which may only shrink\n",
			maxFileLines, maxFuncLines, *allow)
		os.Exit(1)
	}
	fmt.Printf("sizes: ok (%d offenders left in %s)\n", len(listed), *allow)
}

// check compares what was found with the allowlist.
func check(found []offender, listed map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, o := range found {
		seen[o.key] = true
		max, ok := listed[o.key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: %d lines, over the limit", o.key, o.lines))
		case o.lines > max:
			out = append(out, fmt.Sprintf("%s: %d lines, grew past the %d the allowlist holds it to", o.key, o.lines, max))
		case o.lines < max:
			out = append(out, fmt.Sprintf("%s: %d lines, down from %d: lower the allowlist's figure to %d", o.key, o.lines, max, o.lines))
		}
	}
	for k := range listed {
		if !seen[k] {
			out = append(out, fmt.Sprintf("%s: within the limit now (or gone): remove it from the allowlist", k))
		}
	}
	sort.Strings(out)
	return out
}

// cFiles are the hand-written C files measured, by their path from the
// root: the product's programs at the top of bpf/ and the lab's in
// bpf/lab/, not the headers vendored under bpf/include/.
var cFiles = []string{"bpf/*.[ch]", "bpf/lab/*.[ch]"}

func isCFile(rel string) bool {
	for _, p := range cFiles {
		if ok, _ := filepath.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// measure finds every offender among the repository's Go and C files.
func measure(root string) ([]offender, error) {
	var out []offender
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
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if isCFile(rel) {
			o, err := measureLength(path, rel)
			out = append(out, o...)
			return err
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_bpfel.go") {
			return nil
		}
		o, err := measureFile(path, rel)
		out = append(out, o...)
		return err
	})
	return out, err
}

// measureLength holds a file to the file limit only: C functions are not
// parsed (the BPF programs' inlined helpers are long by the verifier's
// needs, not by neglect).
func measureLength(path, rel string) ([]offender, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return fileOver(src, rel), nil
}

func fileOver(src []byte, rel string) []offender {
	if n := strings.Count(string(src), "\n"); n > maxFileLines {
		return []offender{{"file " + rel, n}}
	}
	return nil
}

func measureFile(path, rel string) ([]offender, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if generated.Match(src) {
		return nil, nil
	}
	out := fileOver(src, rel)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if n > maxFuncLines {
			out = append(out, offender{"func " + rel + " " + funcName(fd), n})
		}
	}
	return out, nil
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// readAllow reads the allowlist: "LINES file PATH" or "LINES func PATH
// NAME" a line; # starts a comment.
func readAllow(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, key, ok := strings.Cut(line, " ")
		lines, err := strconv.Atoi(n)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s:%d: want LINES file PATH or LINES func PATH NAME", path, ln)
		}
		out[strings.TrimSpace(key)] = lines
	}
	return out, sc.Err()
}
