// Package netns runs code inside another network namespace without leaving
// the calling thread there, and reaches that namespace's view of sysfs and
// /proc/net, which are keyed to the namespace of whoever looks.
package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where iproute2 keeps named network namespaces.
const Dir = "/run/netns"

// Path turns a namespace name into a path: "" stays "" (the current
// namespace), a name with a slash is already a path (/proc/PID/ns/net),
// anything else is a name under Dir.
func Path(name string) string {
	if name == "" || strings.Contains(name, "/") {
		return name
	}
	return filepath.Join(Dir, name)
}

// Label names a namespace for people: "host" for "" (the namespace falcon
// runs in, the host's own in normal use), else the name or path as given.
func Label(name string) string {
	if name == "" {
		return "host"
	}
	return name
}

// Exists reports whether the namespace can be opened.
func Exists(name string) bool {
	if name == "" {
		return true
	}
	f, err := os.Open(Path(name))
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// Check returns a clear error when the namespace does not exist.
func Check(name string) error {
	if !Exists(name) {
		return fmt.Errorf("network namespace %q not found (see 'ip netns list')", name)
	}
	return nil
}

// Inode returns the inode that identifies namespace name, the number the
// kernel's struct net carries (net->ns.inum): unlike a path such as
// /proc/PID/ns/net, it names the namespace for as long as it lives. ""
// is the calling thread's namespace, read from /proc/thread-self (see
// WithSysfs for why never /proc/self).
func Inode(name string) (uint64, error) {
	p := Path(name)
	if p == "" {
		p = "/proc/thread-self/ns/net"
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		if name != "" && errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("network namespace %q not found (see 'ip netns list'): %w", name, err)
		}
		return 0, fmt.Errorf("network namespace %q: %w", name, err)
	}
	return st.Ino, nil
}

// Do runs fn on a locked OS thread inside namespace name ("" = current).
// The thread returns to its namespace afterwards; if it cannot, it is left
// locked so the Go runtime discards it instead of reusing it.
func Do(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	target, err := os.Open(Path(name))
	if err != nil {
		return fmt.Errorf("network namespace %q: %w", name, err)
	}
	defer target.Close()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return // thread stays locked and dies with the goroutine
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %q: %w", name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("return from network namespace %q: %w", name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// WithSysfs runs fn with a sysfs of namespace name mounted at the returned
// root (for the current namespace, "/sys" itself). sysfs shows the network
// devices of the namespace that mounted it, so for another namespace the
// thread gets a private mount namespace and mounts a fresh sysfs over /sys
// there, as 'ip netns exec' does; the thread is thrown away afterwards, so
// nothing outside it ever sees the mount. Should the Go runtime have run
// fn on the main thread, that thread cannot exit and is parked for good in
// namespace name instead: code that means "this thread" must therefore
// read /proc/thread-self, never /proc/self (the main thread).
func WithSysfs(name string, fn func(root string) error) error {
	if name == "" {
		return fn("/sys")
	}
	target, err := os.Open(Path(name))
	if err != nil {
		return fmt.Errorf("network namespace %q: %w", name, err)
	}
	defer target.Close()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread's mount namespace is private
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("private mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			errc <- fmt.Errorf("make mounts private: %w", err)
			return
		}
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %q: %w", name, err)
			return
		}
		if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
			errc <- fmt.Errorf("mount sysfs of %q: %w", name, err)
			return
		}
		errc <- fn("/sys")
	}()
	return <-errc
}

// ReadProcNet reads a file of /proc/net (e.g. "snmp", "dev") as seen from
// namespace name.
func ReadProcNet(name, file string) ([]byte, error) {
	var b []byte
	err := Do(name, func() error {
		var err error
		b, err = os.ReadFile(filepath.Join("/proc/thread-self/net", file))
		return err
	})
	return b, err
}
