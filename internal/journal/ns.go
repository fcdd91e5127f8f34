package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

var (
	errNoDev     = syscall.ENODEV
	errNetnsGone = errors.New("network namespace gone")
)

// inNetns runs fn inside namespace name; with sysfs, /sys there shows that
// namespace's devices. Where /sys or /proc/sys is mounted read-only, as in
// an unprivileged Kubernetes pod, fn runs in a private mount namespace where
// they are writable; that namespace never leaves fn's thread.
func inNetns(name string, sysfs bool, fn func(ino uint64) error) error {
	ino, err := netns.Inode(name)
	if err != nil {
		return err
	}
	roProc := readOnly("/proc/sys")
	roSys := sysfs && name == "" && readOnly("/sys")
	switch {
	case sysfs && name != "":
		return netns.WithSysfs(name, func(string) error {
			if roProc {
				if err := remountRW("/proc/sys"); err != nil {
					return err
				}
			}
			return fn(ino)
		})
	case roProc || roSys:
		return privateMounts(name, roSys, roProc, func() error { return fn(ino) })
	default:
		return netns.Do(name, func() error { return fn(ino) })
	}
}

// privateMounts runs fn on a thread of its own with a private mount
// namespace in which /sys and/or /proc/sys are writable, inside network
// namespace name. The thread is never reused.
func privateMounts(name string, sys, proc bool, fn func() error) error {
	var target *os.File
	if name != "" {
		var err error
		if target, err = os.Open(netns.Path(name)); err != nil {
			return fmt.Errorf("network namespace %q: %w", name, err)
		}
		defer target.Close()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread's mounts are private
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("private mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			errc <- fmt.Errorf("make mounts private: %w", err)
			return
		}
		if target != nil {
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				errc <- fmt.Errorf("enter network namespace %q: %w", name, err)
				return
			}
		}
		if sys {
			if err := remountRW("/sys"); err != nil {
				errc <- err
				return
			}
		}
		if proc {
			if err := remountRW("/proc/sys"); err != nil {
				errc <- err
				return
			}
		}
		errc <- fn()
	}()
	return <-errc
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

func readOnly(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Flags&unix.ST_RDONLY != 0
}

// inNetnsIno is inNetns for a namespace that must still be the one with
// inode ino; errNetnsGone if it is not there any more.
func inNetnsIno(name string, ino uint64, sysfs bool, fn func() error) error {
	cur, err := netns.Inode(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
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
	return inNetns(name, sysfs, func(uint64) error { return fn() })
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
