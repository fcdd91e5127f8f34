package fileutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// writers are the two ways to replace a file: synced and not.
var writers = map[string]func(string, []byte, os.FileMode) error{"WriteAtomic": WriteAtomic, "Publish": Publish}

func TestWriteAtomicReplaces(t *testing.T) {
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "state.json")
			for _, s := range []string{"first\n", "second\n"} {
				if err := write(p, []byte(s), 0o640); err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(p); err != nil || string(b) != s {
					t.Fatalf("read back %q, %v; want %q", b, err, s)
				}
			}
			old := syscall.Umask(0)
			syscall.Umask(old)
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if want := os.FileMode(0o640) &^ os.FileMode(old); st.Mode().Perm() != want {
				t.Errorf("mode %v, want %v (0640 under umask %03o)", st.Mode().Perm(), want, old)
			}
			assertOnly(t, dir, "state.json")
		})
	}
}

func TestWriteAtomicFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteAtomic(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename: the write fails at the very
	// end, after the temporary file was written.
	d := filepath.Join(dir, "d")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(d, []byte("new"), 0o600); err == nil {
		t.Fatal("replacing a non-empty directory succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("%s = %q after a failed write elsewhere", p, b)
	}
	assertOnly(t, dir, "d", "f")
	if err := WriteAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write into a missing directory: %v, want not-exist", err)
	}
}

func TestWriteJSON(t *testing.T) {
	for name, write := range map[string]func(string, any, os.FileMode) error{"WriteJSON": WriteJSON, "PublishJSON": PublishJSON} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "v.json")
			if err := write(p, map[string]int{"a": 1}, 0o600); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(p); string(b) != "{\n  \"a\": 1\n}\n" {
				t.Errorf("got %q", b)
			}
			if err := write(p, func() {}, 0o600); err == nil {
				t.Error("a function marshalled")
			}
		})
	}
}

// assertOnly checks that no temporary file was left behind.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
	for i := range got {
		if got[i] != names[i] {
			t.Fatalf("%s holds %v, want %v", dir, got, names)
		}
	}
}
