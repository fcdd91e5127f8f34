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
	"slices"
	"strconv"
	"strings"
	"sync"

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
	f, err := Open(name)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// Check returns a clear error when name is no network namespace: not
// there, or a file of another kind (see Open).
func Check(name string) error {
	f, err := Open(name)
	if err != nil {
		return err
	}
	return f.Close()
}

// Cookie returns the cookie of the calling thread's network namespace
// (SO_NETNS_COOKIE, Linux 5.14+), 0 where the kernel has none. Unlike the
// inode, which the kernel hands to a new namespace once the old one is
// gone (nsfs inodes come from proc's lowest-free allocator), a cookie is
// never reused. Call it inside the namespace (Do, WithSysfs).
func Cookie() uint64 {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0
	}
	return c
}

// Inode returns the inode that identifies namespace name, the number the
// kernel's struct net carries (net->ns.inum): unlike a path such as
// /proc/PID/ns/net, it names the namespace for as long as it lives. ""
// is the calling thread's namespace, read from /proc/thread-self (see
// WithSysfs for why never /proc/self).
func Inode(name string) (uint64, error) {
	id, err := Identify(name)
	return id.Ino, err
}

// Do runs fn on a locked OS thread inside namespace name ("" = current).
// The thread returns to its namespace afterwards; if it cannot, it is left
// locked so the Go runtime discards it instead of reusing it.
func Do(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	target, err := Open(name)
	if err != nil {
		return err
	}
	defer target.Close()

	var ferr error
	OnThread(func() bool {
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ferr = err
			return false // the thread dies with the goroutine
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ferr = fmt.Errorf("enter network namespace %q: %w", name, err)
			return true
		}
		ferr = fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			ferr = errors.Join(ferr, fmt.Errorf("return from network namespace %q: %w", name, err))
			return false
		}
		return true
	})
	return ferr
}

// OnThread runs fn on a goroutine locked to an OS thread and waits for it.
// If fn returns true the thread is unlocked and serves other goroutines
// again; otherwise it exits with the goroutine, and with it whatever fn
// changed about it (its network or mount namespace). That thread is never
// the process's main thread: the runtime cannot end the main thread and
// parks it for good instead, in whatever namespaces fn left it, which
// would keep such a namespace (a container's, gone long ago) alive for
// the process's life and make /proc/PID/ns/net name it.
func OnThread(fn func() (reuse bool)) {
	done := make(chan struct{})
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread: hold it while another thread runs fn. The
			// goroutine started here cannot run on it, which serves only
			// this one while it is locked.
			go run()
			<-done
			runtime.UnlockOSThread()
			return
		}
		defer close(done)
		if fn() {
			runtime.UnlockOSThread()
		}
	}
	go run()
	<-done
}

// WithSysfs runs fn with a sysfs of namespace name mounted at the returned
// root (for the current namespace, "/sys" itself). sysfs shows the network
// devices of the namespace that mounted it, so for another namespace the
// thread gets a private mount namespace and mounts a fresh sysfs over /sys
// there, as 'ip netns exec' does; the thread is thrown away afterwards
// (OnThread: never the main thread), so nothing outside it ever sees the
// mount. Code that means "this thread" reads /proc/thread-self, never
// /proc/self (the main thread).
func WithSysfs(name string, fn func(root string) error) error {
	if name == "" {
		return fn("/sys")
	}
	target, err := Open(name)
	if err != nil {
		return err
	}
	defer target.Close()

	var ferr error
	OnThread(func() bool { // never reused: the thread's mount namespace is private
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			ferr = fmt.Errorf("private mount namespace: %w", err)
			return false
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			ferr = fmt.Errorf("make mounts private: %w", err)
			return false
		}
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ferr = fmt.Errorf("enter network namespace %q: %w", name, err)
			return false
		}
		if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
			ferr = fmt.Errorf("mount sysfs of %q: %w", name, err)
			return false
		}
		restore, err := writable(name)
		if err != nil {
			ferr = err
			return false
		}
		ferr = errors.Join(fn("/sys"), restore())
		return false
	})
	return ferr
}

// ReadOnly reports whether the file system holding path is read-only, by
// its mount's flag or its superblock's.
func ReadOnly(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Flags&unix.ST_RDONLY != 0
}

// sysfsRO serialises the times a read-only sysfs is made writable.
var sysfsRO sync.Mutex

// writable makes the sysfs just mounted at /sys writable, if it is not, and
// returns what makes it read-only again. All mounts of one namespace's
// sysfs share one superblock, and a container runtime (runc) mounts the
// container's read-only, which makes the superblock, and every later mount
// of it, read-only: no device of a Docker container could be configured.
// The container's own mount stays read-only meanwhile (its mount flag, not
// the superblock's); the superblock is read-only again when fn returns.
func writable(name string) (restore func() error, err error) {
	if !ReadOnly("/sys") {
		return func() error { return nil }, nil
	}
	sysfsRO.Lock()
	if err := unix.Mount("", "/sys", "", unix.MS_REMOUNT, ""); err != nil {
		sysfsRO.Unlock()
		return nil, fmt.Errorf("sysfs of %q is read-only (a container's) and could not be made writable: %w", name, err)
	}
	return func() error {
		defer sysfsRO.Unlock()
		if err := unix.Mount("", "/sys", "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("sysfs of %q: make it read-only again: %w", name, err)
		}
		return nil
	}, nil
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

// Mounts lists the paths where network namespaces are bind-mounted in this
// process's mount namespace, wherever that is: /run/netns, a Docker
// daemon's EXEC_ROOT/netns (its network sandboxes, which no process lives
// in), a CNI runtime's directory.
func Mounts() []string { return mounts("/proc/self/mountinfo") }

// mounts lists the mount points of network namespaces (nsfs mounts of
// net:[...]) in a mountinfo file.
func mounts(mountinfo string) []string {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return nil
	}
	return parseMounts(b)
}

// parseMounts is mounts on the file's content.
func parseMounts(b []byte) []string {
	var paths []string
	for _, l := range strings.Split(string(b), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		f := strings.Fields(l)
		sep := slices.Index(f, "-")
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "nsfs" || !strings.HasPrefix(f[3], "net:[") {
			continue
		}
		paths = append(paths, unescapeMount(f[4]))
	}
	return paths
}

// unescapeMount undoes the kernel's octal escapes of space, tab, newline
// and backslash in mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
