package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

var (
	errNoDev     = syscall.ENODEV
	errNetnsGone = errors.New("network namespace gone")
)

// nsID names a namespace: its inode, which the kernel hands to a new
// namespace once this one is gone, and its cookie, which it never reuses
// (netns.Cookie; 0 where unknown: a kernel before 5.14, or an entry
// written before cookies were recorded).
type nsID struct{ ino, cookie uint64 }

// same says whether id and o name one namespace: the inodes agree and so
// do the cookies, where both are known.
func (id nsID) same(o nsID) bool {
	return id.ino == o.ino && (id.cookie == o.cookie || id.cookie == 0 || o.cookie == 0)
}

// inNetns runs fn inside namespace name, with its identity; with sysfs,
// /sys there shows that namespace's devices. Where /sys or /proc/sys is
// mounted read-only, as in an unprivileged Kubernetes pod, fn runs in a
// private mount namespace where they are writable; that namespace never
// leaves fn's thread.
func inNetns(name string, sysfs bool, fn func(id nsID) error) error {
	ino, err := netns.Inode(name)
	if err != nil {
		return err
	}
	run := func() error { return fn(nsID{ino, netns.Cookie()}) }
	roProc := netns.ReadOnly("/proc/sys")
	roSys := sysfs && name == "" && netns.ReadOnly("/sys")
	switch {
	case sysfs && name != "":
		return netns.WithSysfs(name, func(string) error {
			if roProc {
				if err := remountRW("/proc/sys"); err != nil {
					return err
				}
			}
			return run()
		})
	case roProc || roSys:
		return privateMounts(name, roSys, roProc, run)
	default:
		return netns.Do(name, run)
	}
}

// privateMounts runs fn on a thread of its own with a private mount
// namespace in which /sys and/or /proc/sys are writable, inside network
// namespace name. The thread is never reused.
func privateMounts(name string, sys, proc bool, fn func() error) error {
	var target *os.File
	if name != "" {
		var err error
		if target, err = netns.Open(name); err != nil {
			return err
		}
		defer target.Close()
	}
	var ferr error
	netns.OnThread(func() bool { // never reused: the thread's mounts are private
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			ferr = fmt.Errorf("private mount namespace: %w", err)
			return false
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			ferr = fmt.Errorf("make mounts private: %w", err)
			return false
		}
		if target != nil {
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				ferr = fmt.Errorf("enter network namespace %q: %w", name, err)
				return false
			}
		}
		if sys {
			if err := remountRW("/sys"); err != nil {
				ferr = err
				return false
			}
		}
		if proc {
			if err := remountRW("/proc/sys"); err != nil {
				ferr = err
				return false
			}
		}
		ferr = fn()
		return false
	})
	return ferr
}

// remountRW makes the mount holding path writable (in the caller's private
// mount namespace): path itself if it is a mount point (runtimes bind
// /proc/sys read-only onto itself), else its parent's.
func remountRW(path string) error {
	for p := path; ; p = filepath.Dir(p) {
		err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND, "")
		if err == nil {
			return nil
		}
		if err != unix.EINVAL || p == "/" {
			return fmt.Errorf("%s is read-only and cannot be made writable in a private mount namespace: %w", path, err)
		}
	}
}

// inNetnsID is inNetns for a namespace that must still be the one id
// names; errNetnsGone if it is not there any more.
func inNetnsID(name string, id nsID, sysfs bool, fn func() error) error {
	ino := id.ino
	cur, err := netns.Inode(name)
	if err != nil && !netns.Gone(err) {
		return err
	}
	if err == nil && cur != ino && name == "" {
		return fmt.Errorf("journal was written in another network namespace (inode %d, now %d): run this from there", ino, cur)
	}
	if err != nil || cur != ino {
		// The path is gone or means another namespace now (a PID that
		// exited and was reused); the namespace itself may live on
		// under another path, e.g. another process of the container.
		if name = findNetns(ino); name == "" {
			return errNetnsGone
		}
	}
	return inNetns(name, sysfs, func(now nsID) error {
		if !now.same(id) {
			return errNetnsGone // the inode went to another namespace
		}
		return fn()
	})
}

// alive says whether the namespace id names still exists, under name or
// another path (see inNetnsID); true also when that cannot be told.
func alive(name string, id nsID) bool {
	ino, err := netns.Inode(name)
	if err != nil && !netns.Gone(err) {
		return true
	}
	if err != nil || ino != id.ino {
		if name = findNetns(id.ino); name == "" {
			return false
		}
	}
	if id.cookie == 0 {
		return true
	}
	var now uint64
	if err := netns.Do(name, func() error { now = netns.Cookie(); return nil }); err != nil {
		return true
	}
	return nsID{id.ino, now}.same(id)
}

// findNetns looks for a path to the namespace with inode ino: bind mounts
// of iproute2, CNI and Docker, then every process.
func findNetns(ino uint64) string {
	var paths []string
	for _, dir := range []string{netns.Dir, "/run/docker/netns"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*"))
		paths = append(paths, m...)
	}
	m, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	paths = append(paths, m...)
	for _, p := range paths {
		if i, err := netns.Inode(p); err == nil && i == ino {
			return p
		}
	}
	return ""
}
