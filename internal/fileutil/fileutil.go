// Package fileutil replaces files so that a reader, or a crash, never sees
// half of one: state and journals that must survive an agent killed
// mid-write, results a long benchmark checkpoints.
package fileutil

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// WriteAtomic replaces path with data: a temporary file in the same
// directory (rename is atomic only within a file system) is written,
// synced and renamed over path, and the directory is synced so the rename
// itself survives a crash. perm is subject to the umask, as with
// os.WriteFile. On error path is left as it was.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := createTemp(path, perm)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // best effort: some file systems cannot sync a directory
		d.Close()
	}
	return nil
}

// WriteJSON replaces path, as WriteAtomic, with v as indented JSON and a
// final newline.
func WriteJSON(path string, v any, perm os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteAtomic(path, append(b, '\n'), perm)
}

// createTemp is os.CreateTemp with a mode: os.CreateTemp's is always 0600,
// and a chmod afterwards would ignore the umask. The name starts with a dot
// and does not end like path, so globs for path's kind of file skip it.
func createTemp(path string, perm os.FileMode) (*os.File, error) {
	dir, base := filepath.Split(path)
	for range 10000 {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, &os.PathError{Op: "createtemp", Path: filepath.Join(dir, "."+base+".tmp-*"), Err: os.ErrExist}
}
