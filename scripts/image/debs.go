package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// file is one entry of the image's file system.
type file struct {
	name string // absolute, cleaned
	mode int64
	data []byte
	link string // symlink target, "" for a regular file
}

// libDirs are where Debian's loader looks for libraries when no
// ld.so.cache exists, as in the image.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// fetchDebs returns the .debs of pkg and of the library packages it
// depends on, from cache, downloading with apt-get download what is not
// there yet. Only lib* packages are followed: they are what a binary loads,
// everything else it depends on is packaging.
func fetchDebs(cache, pkg string) ([]string, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	queue := []string{pkg}
	var debs []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		deb, err := fetchDeb(cache, p)
		if err != nil {
			return nil, err
		}
		debs = append(debs, deb)
		out, err := exec.Command("dpkg-deb", "-f", deb, "Pre-Depends", "Depends").Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-deb -f %s: %w", deb, err)
		}
		for _, d := range dependencies(string(out)) {
			if strings.HasPrefix(d, "lib") {
				queue = append(queue, d)
			}
		}
	}
	sort.Strings(debs)
	return debs, nil
}

// dependencies reads dpkg-deb -f's "Depends: libc6 (>= 2.34), libssl3 |
// libssl1.1, foo:any" lines: the first alternative of each, bare.
func dependencies(fields string) []string {
	var out []string
	for _, line := range strings.Split(fields, "\n") {
		_, list, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		for _, dep := range strings.Split(list, ",") {
			first, _, _ := strings.Cut(dep, "|")
			name := strings.Fields(first)
			if len(name) > 0 {
				n, _, _ := strings.Cut(name[0], ":")
				out = append(out, n)
			}
		}
	}
	return out
}

// fetchDeb returns the cached .deb of pkg, downloading it when there is
// none. rm -r the cache to take Debian's current versions.
func fetchDeb(cache, pkg string) (string, error) {
	if m, _ := filepath.Glob(filepath.Join(cache, pkg+"_*.deb")); len(m) > 0 {
		sort.Strings(m)
		return m[len(m)-1], nil
	}
	args := []string{"download", "-q"}
	if os.Geteuid() == 0 {
		// As root, apt hands downloads to the _apt user, which may not
		// write into a root-owned cache.
		args = append(args, "-o", "APT::Sandbox::User=root")
	}
	cmd := exec.Command("apt-get", append(args, pkg)...)
	cmd.Dir = cache
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %v\n%s(no package lists? apt-get update; no network? put the .debs in %s)", pkg, err, out, cache)
	}
	m, _ := filepath.Glob(filepath.Join(cache, pkg+"_*.deb"))
	if len(m) == 0 {
		return "", fmt.Errorf("apt-get download %s left no %s_*.deb in %s", pkg, pkg, cache)
	}
	return m[0], nil
}

// debFiles reads the regular files and symlinks of the .debs' data.
func debFiles(debs []string) (map[string]file, error) {
	files := map[string]file{}
	for _, deb := range debs {
		data, err := exec.Command("dpkg-deb", "--fsys-tarfile", deb).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w", deb, err)
		}
		tr := tar.NewReader(bytes.NewReader(data))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", deb, err)
			}
			f := file{name: path.Clean("/" + h.Name), mode: h.Mode & 0o7777}
			switch h.Typeflag {
			case tar.TypeSymlink:
				f.link = h.Linkname
			case tar.TypeReg:
				if f.data, err = io.ReadAll(tr); err != nil {
					return nil, fmt.Errorf("%s: %s: %w", deb, h.Name, err)
				}
			default:
				continue
			}
			files[f.name] = f
		}
	}
	return files, nil
}

// closure picks from files the executable bin and everything the loader
// needs to run it: its interpreter and its libraries, recursively, each
// library as the symlinks that name it and the file they lead to. A
// library that none of the files provides is an error: the image would
// carry a tool that cannot start.
func closure(files map[string]file, bin string) ([]file, error) {
	picked := map[string]file{}
	var add func(name string) error
	add = func(name string) error {
		for range 16 {
			f, ok := files[name]
			if !ok {
				return fmt.Errorf("%s: not in the packages", name)
			}
			if _, done := picked[name]; done {
				return nil
			}
			picked[name] = f
			if f.link == "" {
				return addNeeded(f, files, add)
			}
			target := f.link
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(name), target)
			}
			name = path.Clean(target)
		}
		return fmt.Errorf("%s: too many symlinks", name)
	}
	if err := add(bin); err != nil {
		return nil, err
	}
	out := make([]file, 0, len(picked))
	for _, f := range picked {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// addNeeded adds the interpreter and DT_NEEDED libraries of ELF file f.
func addNeeded(f file, files map[string]file, add func(string) error) error {
	e, err := elf.NewFile(bytes.NewReader(f.data))
	if err != nil {
		return nil // not ELF: a script or data needs no loader
	}
	defer e.Close()
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return fmt.Errorf("%s: interpreter: %w", f.name, err)
			}
			if err := add(strings.TrimRight(string(b), "\x00")); err != nil {
				return fmt.Errorf("%s: interpreter: %w", f.name, err)
			}
		}
	}
	libs, err := e.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	for _, lib := range libs {
		found := false
		for _, d := range libDirs {
			if _, ok := files[path.Join(d, lib)]; ok {
				if err := add(path.Join(d, lib)); err != nil {
					return err
				}
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s needs %s, which no package fetched provides", f.name, lib)
		}
	}
	return nil
}
