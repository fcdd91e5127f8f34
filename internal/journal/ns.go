package journal

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/falconnet/falcon/internal/netns"
)

var (
	errNoDev     = syscall.ENODEV
	errNetnsGone = errors.New("network namespace gone")
)

// NetnsIno returns the inode that identifies namespace name ("" = the
// current one).
func NetnsIno(name string) (uint64, error) {
	p := netns.Path(name)
	if name == "" {
		p = "/proc/self/ns/net"
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, fmt.Errorf("network namespace %q: %w", name, err)
	}
	return st.Ino, nil
}

// inNetns runs fn inside namespace name; with sysfs, /sys there shows that
// namespace's devices.
func inNetns(name string, sysfs bool, fn func(ino uint64) error) error {
	ino, err := NetnsIno(name)
	if err != nil {
		return err
	}
	if sysfs {
		return netns.WithSysfs(name, func(string) error { return fn(ino) })
	}
	return netns.Do(name, func() error { return fn(ino) })
}

// inNetnsIno is inNetns for a namespace that must still be the one with
// inode ino; errNetnsGone if it is not there any more.
func inNetnsIno(name string, ino uint64, sysfs bool, fn func() error) error {
	cur, err := NetnsIno(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errNetnsGone
		}
		return err
	}
	if cur != ino {
		if name == "" {
			return fmt.Errorf("journal was written in another network namespace (inode %d, now %d): run this from there", ino, cur)
		}
		return errNetnsGone
	}
	return inNetns(name, sysfs, func(uint64) error { return fn() })
}
