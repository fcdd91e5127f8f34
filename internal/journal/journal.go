// Package journal changes the sysfs and procfs values falcon sets (RPS and
// RFS: values.go, the only ones it will write), in any network namespace,
// so that every change can be undone exactly: the old value is written to a
// journal file (and synced) before the new value is written, so even a crash
// half-way leaves enough behind to restore the system. Falcon's modes (falcon,
// rps, rfs) and the fast path's sender RPS all write their settings through
// it.
package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/falconnet/falcon/internal/fileutil"
)

// Entry is one value falcon changed. Netns is "" for the namespace the
// journal's owner runs in, a name under /run/netns, or a path such as
// /proc/PID/ns/net. NetnsIno and NetnsCookie pin the namespace itself: a
// PID (and so a /proc path) can be reused by another namespace after the
// container is gone, and so can the inode (the kernel hands a freed one to
// the next namespace it makes), and a value must never be "restored" into a
// stranger. The cookie is 0 where the kernel has none (before 5.14).
type Entry struct {
	Netns       string `json:"netns,omitempty"`
	NetnsIno    uint64 `json:"netns_ino"`
	NetnsCookie uint64 `json:"netns_cookie,omitempty"`
	Path        string `json:"path"`
	Old         string `json:"old"`
	New         string `json:"new"`
}

// Change is a value to write: Path is one of the values falcon changes
// (checkPath).
type Change struct {
	Path  string
	Value string
}

// Journal is the set of values changed so far, mirrored in a file.
type Journal struct {
	file    string
	mu      sync.Mutex
	entries []Entry
}

type fileFormat struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Open loads the journal in file, or starts an empty one (the file is
// created on the first change).
func Open(file string) (*Journal, error) {
	j := &Journal{file: file}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, err
	}
	var f fileFormat
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("journal %s is corrupt (%v); its values cannot be restored automatically", file, err)
	}
	j.entries = f.Entries
	return j, nil
}

// Entries returns a copy of the recorded changes, oldest first.
func (j *Journal) Entries() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Entry(nil), j.entries...)
}

// save writes the journal atomically and durably: a torn journal would lose
// the old values it exists to keep.
func (j *Journal) save() error {
	if len(j.entries) == 0 {
		err := os.Remove(j.file)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := os.MkdirAll(filepath.Dir(j.file), 0o700); err != nil {
		return err
	}
	return fileutil.WriteJSON(j.file, fileFormat{Version: 1, Entries: j.entries}, 0o600)
}

func (e Entry) id() nsID { return nsID{e.NetnsIno, e.NetnsCookie} }

func (j *Journal) find(id nsID, path string) int {
	for i, e := range j.entries {
		if e.id().same(id) && e.Path == path {
			return i
		}
	}
	return -1
}

// Apply writes the changes in namespace netns. Values already as wanted are
// left alone and not recorded; a value changed before keeps its first old
// value, so applying twice is harmless and restore still returns to the
// state before the first apply.
func (j *Journal) Apply(netns string, changes []Change) error {
	if len(changes) == 0 {
		return nil
	}
	for _, c := range changes {
		if err := checkPath(c.Path); err != nil {
			return err
		}
	}
	return j.apply(netns, needsSysfs(changes), func() ([]Change, error) { return changes, nil })
}

// ApplyFunc is Apply with the changes computed by fn inside namespace netns
// (with its sysfs at /sys), for changes that depend on what is there, such
// as a device's receive queues.
func (j *Journal) ApplyFunc(netns string, fn func() ([]Change, error)) error {
	return j.apply(netns, true, func() ([]Change, error) {
		changes, err := fn()
		if err != nil {
			return nil, err
		}
		for _, c := range changes {
			if err := checkPath(c.Path); err != nil {
				return nil, err
			}
		}
		return changes, nil
	})
}

func (j *Journal) apply(netns string, sysfs bool, fn func() ([]Change, error)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return inNetns(netns, sysfs, func(id nsID) error {
		changes, err := fn()
		if err != nil {
			return err
		}
		var todo []Change
		for _, c := range changes {
			cur, err := readValue(c.Path)
			if err != nil {
				return err
			}
			i := j.find(id, c.Path)
			switch {
			case i >= 0:
				j.entries[i].New = c.Value
				if cur != c.Value {
					todo = append(todo, c)
				}
			case cur != c.Value:
				j.entries = append(j.entries, Entry{Netns: netns, NetnsIno: id.ino, NetnsCookie: id.cookie,
					Path: c.Path, Old: cur, New: c.Value})
				todo = append(todo, c)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		if err := j.save(); err != nil {
			return fmt.Errorf("journal %s: %w", j.file, err)
		}
		for _, c := range todo {
			if err := writeValue(c.Path, c.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

// Restore writes back every old value, newest change first, and removes the
// journal file once everything is restored. Values whose namespace or device
// is gone are dropped: there is nothing left to restore. Entries that fail
// otherwise stay in the journal so that a later Restore can retry them.
func (j *Journal) Restore() error { return j.RestoreWhere(nil) }

// RestoreWhere is Restore for the entries match accepts (nil: every one);
// the others stay recorded and in force, for the part of falcon that set
// them to keep or restore later.
func (j *Journal) RestoreWhere(match func(Entry) bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	keep := make([]bool, len(j.entries))
	// Entries of one namespace are restored in one visit; the visits go from
	// the newest entry backwards so that a value changed twice ends at its
	// oldest value.
	done := make([]bool, len(j.entries))
	for i, e := range j.entries {
		if match != nil && !match(e) {
			done[i], keep[i] = true, true
			continue
		}
		// As when it was recorded: the file is falcon's, but a value is
		// written as root wherever it says (values.go).
		if err := checkPath(e.Path); err != nil {
			done[i] = true
			errs = append(errs, fmt.Errorf("%w: refused, left as it is, and dropped from %s", err, j.file))
		}
	}
	for last := len(j.entries) - 1; last >= 0; last-- {
		if done[last] {
			continue
		}
		ns, id := j.entries[last].Netns, j.entries[last].id()
		var idx []int
		for i := last; i >= 0; i-- {
			if !done[i] && j.entries[i].id() == id && j.entries[i].Netns == ns {
				idx = append(idx, i)
				done[i] = true
			}
		}
		var group []Change
		for _, i := range idx {
			group = append(group, Change{Path: j.entries[i].Path, Value: j.entries[i].Old})
		}
		err := inNetnsID(ns, id, needsSysfs(group), func() error {
			for k, i := range idx {
				werr := writeValue(group[k].Path, group[k].Value)
				if werr != nil && !gone(werr) {
					keep[i] = true
					errs = append(errs, werr)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errNetnsGone) {
			for _, i := range idx {
				keep[i] = true
			}
			errs = append(errs, err)
		}
	}
	var rest []Entry
	for i, e := range j.entries {
		if keep[i] {
			rest = append(rest, e)
		}
	}
	j.entries = rest
	if err := j.save(); err != nil {
		errs = append(errs, fmt.Errorf("journal %s: %w", j.file, err))
	}
	return errors.Join(errs...)
}

// Prune drops the entries of namespaces that are gone (containers that
// ended), and of devices gone from a namespace that lives on (a runtime
// deletes a container's end before its namespace, which may linger):
// there is nothing left to restore in them, and the journal of an agent
// that runs for months beside short-lived containers must not grow
// without bound. The host namespace's entries stay.
func (j *Journal) Prune() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	byNS := map[string][]int{}
	for i, e := range j.entries {
		if e.Netns != "" {
			k := fmt.Sprintf("%s\x00%d\x00%d", e.Netns, e.NetnsIno, e.NetnsCookie)
			byNS[k] = append(byNS[k], i)
		}
	}
	drop := map[int]bool{}
	for _, idx := range byNS {
		e := j.entries[idx[0]]
		if !alive(e.Netns, e.id()) {
			for _, i := range idx {
				drop[i] = true
			}
			continue
		}
		// Unreadable (the namespace went meanwhile, no sysfs): keep them,
		// the next Prune or Restore settles them.
		_ = inNetnsID(e.Netns, e.id(), true, func() error {
			for _, i := range idx {
				if _, err := os.Stat(j.entries[i].Path); errors.Is(err, os.ErrNotExist) {
					drop[i] = true
				}
			}
			return nil
		})
	}
	if len(drop) == 0 {
		return nil
	}
	var kept []Entry
	for i, e := range j.entries {
		if !drop[i] {
			kept = append(kept, e)
		}
	}
	j.entries = kept
	return j.save()
}

// Restore restores the journal in file, if there is one.
func Restore(file string) error {
	j, err := Open(file)
	if err != nil {
		return err
	}
	return j.Restore()
}

func needsSysfs(cs []Change) bool {
	for _, c := range cs {
		if strings.HasPrefix(c.Path, "/sys/") {
			return true
		}
	}
	return false
}

func readValue(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func writeValue(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	return nil
}

// gone reports errors that mean the device (and so the value) no longer
// exists.
func gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, errNoDev)
}
