// Package fileutil replaces files so that a reader, or a crash, never sees
// half of one: state and journals that must survive an agent killed
// mid-write or a crash, results a long benchmark checkpoints (synced), and
// statistics an agent rewrites each second (not synced).
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
	return replace(path, data, perm, true)
}

// Publish replaces path with data as WriteAtomic does, without the syncs:
// for what readers poll and the writer rewrites soon (an agent's statistics
// each second), where a reader still never sees half a file but a sync
// would only flush the disk, twice a write where /run is not a tmpfs.
func Publish(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, false)
}

// WriteJSON replaces path, as WriteAtomic, with v as indented JSON and a
// final newline.
func WriteJSON(path string, v any, perm os.FileMode) error {
	b, err := indented(v)
	if err != nil {
		return err
	}
	return WriteAtomic(path, b, perm)
}

// PublishJSON is WriteJSON by Publish.
func PublishJSON(path string, v any, perm os.FileMode) error {
	b, err := indented(v)
	if err != nil {
		return err
	}
	return Publish(path, b, perm)
}

func indented(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

func replace(path string, data []byte, perm os.FileMode, durable bool) error {
	f, err := createTemp(path, perm)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // best effort: some file systems cannot sync a directory
		d.Close()
	}
	return nil
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
