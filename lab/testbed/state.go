package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/internal/netns"
)

// StateDir holds one JSON file per testbed, for Get and List. The
// namespaces are the truth: Down and DownAll work without it.
var StateDir = "/run/falcon/testbeds"

func statePath(name string) string { return filepath.Join(StateDir, name+".json") }

func writeState(t *Testbed) error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	err := fileutil.WriteJSON(statePath(t.Name), t, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		// A Down of another testbed removed the directory, now empty.
		if err = os.MkdirAll(StateDir, 0o755); err == nil {
			err = fileutil.WriteJSON(statePath(t.Name), t, 0o644)
		}
	}
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

func readState(name string) (*Testbed, error) {
	b, err := os.ReadFile(statePath(name))
	if err != nil {
		return nil, err
	}
	var t Testbed
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("state file %s: %w", statePath(name), err)
	}
	return &t, nil
}

// allNS returns the testbed namespaces on the machine, by testbed name.
func allNS() (map[string][]string, error) {
	ents, err := os.ReadDir(netns.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list network namespaces: %w", err)
	}
	m := map[string][]string{}
	for _, e := range ents {
		if name, _, _, ok := parseNS(e.Name()); ok {
			m[name] = append(m[name], e.Name())
		}
	}
	return m, nil
}

// owned returns the namespaces of testbed name.
func owned(name string) ([]string, error) {
	m, err := allNS()
	return m[name], err
}

// removeNS deletes a namespace. Processes still inside (a benchmark's
// iperf3) would keep it, and its devices, alive but invisible, so they are
// killed first.
func removeNS(ns string) error {
	killIn(ns)
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil && netns.Exists(ns) {
		return fmt.Errorf("ip netns del %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// killIn kills every process in namespace ns but this one.
func killIn(ns string) {
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// unmount detaches the mount at path.
func unmount(path string) error {
	if err := syscall.Unmount(path, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("umount %s: %w", path, err)
	}
	return nil
}

// Down removes testbed name: all its namespaces (and with them every device
// in them) and its state file. It works from the namespaces alone, after an
// interrupted Up or with namespaces already gone; a testbed that does not
// exist at all is not an error.
func Down(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	nss, err := owned(name)
	if err != nil {
		return err
	}
	// The daemons' pods are deleted the CNI way while their namespaces
	// are still there.
	errs := []error{teardownDaemons(name)}
	for _, ns := range nss {
		errs = append(errs, removeNS(ns))
	}
	if err := os.Remove(statePath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	// Leave no empty directories behind; Remove keeps non-empty ones.
	if os.Remove(StateDir) == nil {
		os.Remove(filepath.Dir(StateDir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("testbed %s: %w", name, err)
	}
	return nil
}

// DownAll removes every testbed on the machine.
func DownAll() error { return downAll(func(string) bool { return true }) }

// downAll removes the testbeds whose names pass keep (tests must not take
// down testbeds of others running beside them).
func downAll(keep func(name string) bool) error {
	names, err := names()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if keep(n) {
			errs = append(errs, Down(n))
		}
	}
	return errors.Join(errs...)
}

// names returns the testbeds present as namespaces or state files.
func names() ([]string, error) {
	m, err := allNS()
	if err != nil {
		return nil, err
	}
	var ns []string
	for n := range m {
		ns = append(ns, n)
	}
	files, _ := filepath.Glob(filepath.Join(StateDir, "*.json"))
	dirs, _ := filepath.Glob(filepath.Join(StateDir, "*.d"))
	for _, f := range append(files, dirs...) {
		n := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".json"), ".d")
		if ValidateName(n) == nil && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns, nil
}

// ErrNotFound is returned (wrapped) by Get for a testbed that does not exist.
var ErrNotFound = errors.New("no such testbed")

// inspect returns what is known about testbed name and what is wrong with
// it; nil if nothing of it exists.
func inspect(name string, present []string) *Testbed {
	t, err := readState(name)
	if err != nil {
		if len(present) == 0 && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		// Without state only the namespaces tell what there is.
		t = &Testbed{Name: name}
		for hi, h := range hostNames {
			t.Hosts[hi] = Host{Name: h, Netns: hostNS(name, h)}
		}
		for _, ns := range present {
			if _, h, c, _ := parseNS(ns); c != "" {
				hi := slices.Index(hostNames[:], h)
				t.Hosts[hi].Containers = append(t.Hosts[hi].Containers, Container{Name: c, Netns: ns})
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			t.Problems = append(t.Problems, "no state file (its 'up' was interrupted or is still running)")
		} else {
			t.Problems = append(t.Problems, err.Error())
		}
	}
	for _, ns := range t.Namespaces() {
		if !slices.Contains(present, ns) {
			t.Problems = append(t.Problems, fmt.Sprintf("namespace %s is gone", ns))
		}
	}
	return t
}

// Get returns the testbed called name, or an error that says what is wrong
// with it (it does not exist, a namespace vanished, its 'up' did not finish).
func Get(name string) (*Testbed, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	present, err := owned(name)
	if err != nil {
		return nil, err
	}
	t := inspect(name, present)
	if t == nil {
		return nil, fmt.Errorf("testbed %s: %w", name, ErrNotFound)
	}
	if len(t.Problems) > 0 {
		return nil, fmt.Errorf("testbed %s is broken: %s; remove it with 'falcon-lab testbed down --name %s'",
			name, strings.Join(t.Problems, "; "), name)
	}
	return t, nil
}

// List returns every testbed on the machine, sorted by name, including
// broken ones (with Problems set) found only by their namespaces.
func List() ([]Testbed, error) {
	m, err := allNS()
	if err != nil {
		return nil, err
	}
	ns, err := names()
	if err != nil {
		return nil, err
	}
	var out []Testbed
	for _, n := range ns {
		if t := inspect(n, m[n]); t != nil {
			out = append(out, *t)
		}
	}
	return out, nil
}
