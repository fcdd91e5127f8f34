package testbed

import (
	"bufio"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testdata/host-paths lists where the layouts' daemons (and kubectl and
// docker's CLI) write by default, outside the testbed: the layouts keep
// them in the nodes' private mounts or the testbed's directory, or record
// and remove them (hostPaths). scripts/fresh-check.sh moves them aside too.
const hostPathsFile = "testdata/host-paths"

// asideSuffix names a path a test moved aside while it runs.
const asideSuffix = ".falcon-test-aside"

// outsidePaths reads hostPathsFile: a path a line, ~ for $HOME, # comments.
func outsidePaths(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(hostPathsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	home, herr := os.UserHomeDir()
	var paths []string
	for s := bufio.NewScanner(f); s.Scan(); {
		l := strings.TrimSpace(s.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		if rest, ok := strings.CutPrefix(l, "~/"); ok {
			if herr != nil {
				continue // no home: nothing there to write to
			}
			l = filepath.Join(home, rest)
		}
		paths = append(paths, l)
	}
	return paths
}

// outside is the state of the paths outside the testbed while a test
// runs: each listed path that existed was moved aside (renamed beside
// itself), so the test sees what its daemons make as a fresh machine
// would (a MkdirAll of a path that exists makes nothing to see), unless a
// process of the machine holds a file or a mount under it: moving that
// would pull it from under the process, so it stays, and only its listed
// paths' existence can be compared.
type outside struct {
	paths []string        // the listed paths
	moved []string        // moved aside, restored at cleanup
	kept  map[string]bool // listed paths that stay, in use by the machine
	done  bool            // checked
}

// freshOutside moves the outside paths aside and restores them when the
// test ends; whatever the test left in their place is removed first.
// Call it before the testbed is built, so that its Down runs first.
func freshOutside(t *testing.T) *outside {
	t.Helper()
	return freshOutsideOf(t, outsidePaths(t))
}

func freshOutsideOf(t testing.TB, paths []string) *outside {
	t.Helper()
	o := &outside{paths: paths, kept: map[string]bool{}}
	busy := heldPaths()
	t.Cleanup(func() { o.restore(t) })
	for _, p := range o.paths {
		if slices.ContainsFunc(o.paths, func(q string) bool { return under(p, q) && p != q }) {
			continue // moves with the listed path above it
		}
		aside := p + asideSuffix
		if _, err := os.Lstat(aside); err == nil {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("%s and %s both exist: a killed test moved the first aside, and a testbed made it again; "+
					"remove %s and move %s back", aside, p, p, aside)
			}
			if err := os.Rename(aside, p); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: moved back from %s, where a killed test had left it", p, aside)
		}
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if real := realPath(p); slices.ContainsFunc(busy, func(h string) bool { return under(h, real) }) {
			for _, q := range o.paths {
				if _, err := os.Lstat(q); err == nil && under(q, p) {
					o.kept[q] = true
				}
			}
			t.Logf("%s stays in place: in use on this machine", p)
			continue
		}
		if err := os.Rename(p, aside); err != nil {
			t.Fatalf("moving %s aside: %v", p, err)
		}
		o.moved = append(o.moved, p)
	}
	return o
}

// check fails the test if a path outside the testbed was left: any that
// exists but those kept in place, or one of those gone.
func (o *outside) check(t testing.TB) {
	t.Helper()
	o.done = true
	if left := existing(o.paths); !maps.Equal(left, o.kept) {
		t.Errorf("paths outside the testbed: %v, want %v (before the testbed, with what existed moved aside)", left, o.kept)
	}
}

// restore removes what the test left where nothing was kept, and moves
// the paths moved aside back.
func (o *outside) restore(t testing.TB) {
	if !o.done && !t.Failed() {
		o.check(t)
	}
	for _, p := range o.paths {
		if o.kept[p] || slices.ContainsFunc(o.paths, func(q string) bool { return o.kept[q] && under(p, q) }) {
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			t.Logf("removing %s, left by the test", p)
			if err := os.RemoveAll(p); err != nil {
				t.Error(err)
			}
		}
	}
	for _, p := range o.moved {
		if err := os.Rename(p+asideSuffix, p); err != nil {
			t.Errorf("moving %s back: %v", p, err)
		}
	}
}

// heldPaths are the files the machine's processes hold (open, as their
// working directory or program) and its mount points: where a rename
// would pull something from under them.
func heldPaths() []string {
	var held []string
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 4 {
				held = append(held, strings.ReplaceAll(f[4], `\040`, " "))
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		links, _ := filepath.Glob(p + "/fd/*")
		for _, l := range append(links, p+"/cwd", p+"/exe") {
			if dst, err := os.Readlink(l); err == nil && filepath.IsAbs(dst) {
				held = append(held, strings.TrimSuffix(dst, " (deleted)"))
			}
		}
	}
	return held
}

// realPath is p with the symbolic links of its parent resolved (/var/run
// is /run), as the kernel shows a held path.
func realPath(p string) string {
	if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(d, filepath.Base(p))
	}
	return p
}

// under reports whether p is q or below it.
func under(p, q string) bool { return p == q || strings.HasPrefix(p, q+"/") }

// existing is the subset of paths that exist.
func existing(paths []string) map[string]bool {
	m := map[string]bool{}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			m[p] = true
		}
	}
	return m
}

// TestHostPathsListed: the paths docker-swarm's Down records and removes
// are among those the tests move aside and check.
func TestHostPathsListed(t *testing.T) {
	listed := outsidePaths(t)
	for _, p := range hostPaths {
		if !slices.ContainsFunc(listed, func(q string) bool { return under(p, q) }) {
			t.Errorf("%s (hostPaths) is not in or under a path of %s", p, hostPathsFile)
		}
	}
}

// TestFreshOutside: what exists is moved aside and back, what a process
// holds stays, what the test leaves is reported and removed, and what a
// killed test left aside is moved back first.
func TestFreshOutside(t *testing.T) {
	d := t.TempDir()
	p := func(n string) string { return filepath.Join(d, n) }
	for _, dir := range []string{"moved/sub", "held", "killed" + asideSuffix} {
		if err := os.MkdirAll(p(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	held, err := os.Create(p("held/file"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	paths := []string{p("moved"), p("moved/sub"), p("held"), p("held/new"), p("absent"), p("killed")}
	rec := &recorder{TB: t}
	o := freshOutsideOf(rec, paths)
	if got := existing(paths); !maps.Equal(got, map[string]bool{p("held"): true}) {
		t.Errorf("during the test: %v exist, want only the held one", got)
	}
	for _, dir := range []string{"moved/sub", "absent", "held/new"} { // what a testbed would leave
		os.MkdirAll(p(dir), 0o755)
	}
	for _, f := range slices.Backward(rec.cleanups) {
		f()
	}
	if !rec.failed || !o.done {
		t.Errorf("the check did not fail the test that left paths (failed %v, checked %v)", rec.failed, o.done)
	}
	want := map[string]bool{p("moved"): true, p("moved/sub"): true, p("held"): true, p("held/new"): true, p("killed"): true}
	if got := existing(paths); !maps.Equal(got, want) {
		t.Errorf("after the test: %v exist, want %v", got, want)
	}
	if asides, _ := filepath.Glob(p("*" + asideSuffix)); len(asides) > 0 {
		t.Errorf("left aside: %v", asides)
	}
}

// recorder is a test that fails without failing its parent, its clean-ups
// run by hand.
type recorder struct {
	testing.TB
	failed   bool
	cleanups []func()
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, a ...any) {
	r.failed = true
	r.TB.Logf("(expected) "+format, a...)
}
func (r *recorder) Failed() bool { return r.failed }
