// Package hostpaths keeps the lab's daemons from leaving directories
// outside their roots, which some make whatever they are told
// (containerd's shim sockets under /run/containerd/s, dockerd's
// /run/docker/plugins), when several of them run at once: go test runs
// packages side by side, and a daemon of one may still use a directory
// another's made.
//
// Each user claims the paths while it runs; a path that did not exist when
// a user claimed it is recorded as made, for all of them. The last user to
// release removes the made paths that hold nothing but empty directories,
// deepest first.
//
// Invariant: nothing is removed while any live claim is held, and no path
// that existed before the first claim, nor any file, is ever removed.
package hostpaths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Root holds the claims (claims/<id>: the claimer's pid, 0 for one held
// across processes, as a testbed's from up to down) and the made paths
// (made, a path a line); the last release removes it too.
var Root = "/run/falcon-hostpaths"

// Claim registers id as a user of paths and records those that do not
// exist yet as made. pid is the process whose death ends the claim (0:
// only Release ends it).
func Claim(id string, pid int, paths []string) error {
	return locked(func() error {
		made := readMade()
		for _, p := range paths {
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) && !slices.Contains(made, p) {
				made = append(made, p)
			}
		}
		if err := os.MkdirAll(filepath.Join(Root, "claims"), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(Root, "made"), []byte(strings.Join(made, "\n")), 0o600); err != nil {
			return err
		}
		return os.WriteFile(claimFile(id), []byte(strconv.Itoa(pid)), 0o600)
	})
}

// Release ends id's claim; if no live claim is left, it removes the made
// paths that hold no file and returns those it could not.
func Release(id string) (left []string, err error) {
	err = locked(func() error {
		os.Remove(claimFile(id))
		if live() {
			return nil
		}
		made := readMade()
		for i := len(made) - 1; i >= 0; i-- { // recorded parents first: children first here
			pruneEmpty(made[i])
			if _, err := os.Lstat(made[i]); err == nil {
				left = append(left, made[i])
			}
		}
		return os.RemoveAll(Root)
	})
	return left, err
}

func claimFile(id string) string {
	return filepath.Join(Root, "claims", strings.ReplaceAll(id, "/", "_"))
}

// live says whether a claim is held by a process alive or across processes.
func live() bool {
	ents, _ := os.ReadDir(filepath.Join(Root, "claims"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(Root, "claims", e.Name()))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && (pid == 0 || syscall.Kill(pid, 0) == nil) {
			return true
		}
	}
	return false
}

func readMade() []string {
	b, _ := os.ReadFile(filepath.Join(Root, "made"))
	return strings.Fields(string(b))
}

// locked runs f holding an exclusive lock on Root's parent directory entry
// for Root: a lock file of its own would be one more path to leave.
func locked(f func() error) error {
	dir, err := os.Open(filepath.Dir(Root))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", filepath.Dir(Root), err)
	}
	defer syscall.Flock(int(dir.Fd()), syscall.LOCK_UN)
	return f()
}

// pruneEmpty removes p and the directories under it if they hold no file,
// deepest first; a file keeps it and its parents.
func pruneEmpty(p string) {
	dirs := DirsUnder(p)
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}

// DirsUnder lists top and the directories below it, parents first.
func DirsUnder(top string) []string {
	var dirs []string
	filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs
}
