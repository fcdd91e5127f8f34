package netns

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/quote"
)

// File system magics (linux/magic.h): every namespace file is an nsfs
// inode; /proc/PID/ns/net is a link of procfs's own that leads to one.
const (
	nsfsMagic = 0x6e736673
	procMagic = 0x9fa0
)

// nsGetNstype is NS_GET_NSTYPE (linux/nsfs.h, Linux 4.11): the kind of
// namespace an nsfs file is.
const nsGetNstype = 0xb703

// ErrNotNetns is wrapped by the error for a path that is there but is no
// network namespace: a FIFO, a device, a file left behind where a
// namespace was bind-mounted once.
var ErrNotNetns = errors.New("not a network namespace")

// ID identifies a namespace for as long as it lives, however it is named:
// the device and inode of its nsfs file. Two names of one namespace (""
// and /proc/1/ns/net, foo and /run/netns/foo) have one ID.
type ID struct{ Dev, Ino uint64 }

// Identify returns the ID of namespace name, which must be a network
// namespace (see Open).
func Identify(name string) (ID, error) {
	f, err := Open(name)
	if err != nil {
		return ID{}, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return ID{}, fmt.Errorf("network namespace %s: %w", quote.Short(name), err)
	}
	return ID{Dev: st.Dev, Ino: st.Ino}, nil
}

// Open opens network namespace name ("" = the calling thread's) for
// setns. Whatever the name, nothing blocks and no device is opened: the
// path is first opened with O_PATH|O_NOFOLLOW, which opens no FIFO or
// device, and must be an nsfs file of a network namespace before it is
// opened for real, through that O_PATH descriptor, so that what is checked
// is what is opened.
func Open(name string) (*os.File, error) {
	fd, err := openPath(name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	f, err := os.OpenFile("/proc/thread-self/fd/"+strconv.Itoa(fd), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", quote.Short(name), err)
	}
	t, err := unix.IoctlRetInt(int(f.Fd()), nsGetNstype)
	if err == nil && t != unix.CLONE_NEWNET {
		f.Close()
		return nil, fmt.Errorf("%s is %w: a namespace of another kind", quote.Short(name), ErrNotNetns)
	}
	return f, nil // ENOTTY: a kernel before 4.11, which cannot tell
}

// openPath returns an O_PATH descriptor of namespace name's nsfs file, or
// a clear error when there is none.
func openPath(name string) (int, error) {
	p := Path(name)
	if p == "" {
		p = "/proc/thread-self/ns/net"
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, fmt.Errorf("network namespace %s not found (see 'ip netns list'): %w", quote.Short(name), os.ErrNotExist)
		}
		return -1, fmt.Errorf("network namespace %s: %w", quote.Short(name), err)
	}
	magic, err := fsMagic(fd)
	if err == nil && magic == procMagic && isLink(fd) {
		// /proc/PID/ns/net: a magic link, which leads to the namespace
		// itself whatever the link's text says. Only procfs's are followed.
		unix.Close(fd)
		if fd, err = unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return -1, fmt.Errorf("network namespace %s: %w", quote.Short(name), err)
		}
		magic, err = fsMagic(fd)
	}
	if err != nil || magic != nsfsMagic {
		unix.Close(fd)
		what := "not a namespace file (nsfs)"
		if err != nil {
			what = err.Error()
		}
		return -1, fmt.Errorf("%s is %w: %s", quote.Short(name), ErrNotNetns, what)
	}
	return fd, nil
}

func fsMagic(fd int) (int64, error) {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return 0, err
	}
	return int64(fs.Type), nil
}

func isLink(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// Stamp tells one namespace from every other, during its life and after:
// its ID, which the kernel hands to a later namespace once this one is
// gone, and its cookie, which it never reuses (0 where the kernel has
// none, before 5.14).
type Stamp struct {
	ID
	Cookie uint64
}

// StampOf returns the stamp of the namespace name names now, both parts
// read inside it through one opening of the name, so that a name pointed
// elsewhere meanwhile cannot mix two namespaces' parts.
func StampOf(name string) (Stamp, error) {
	var s Stamp
	err := Do(name, func() error {
		id, err := Identify("")
		s = Stamp{ID: id, Cookie: Cookie()}
		return err
	})
	return s, err
}

// Same says whether s and o stamp one namespace: the IDs agree and so do
// the cookies, where both are known.
func (s Stamp) Same(o Stamp) bool {
	return s.ID == o.ID && (s.Cookie == o.Cookie || s.Cookie == 0 || o.Cookie == 0)
}

// DoIfSame is Do, but only while name still names the namespace stamped s:
// where it is gone or names another namespace now, fn does not run and
// DoIfSame returns nil. What was set up inside that namespace went with
// it, or is not the new one's to undo. The stamp is read inside, through
// the same opening of the name that fn runs in.
func DoIfSame(name string, s Stamp, fn func() error) error {
	err := Do(name, func() error {
		now, err := StampOf("")
		if err != nil || !now.Same(s) {
			return err
		}
		return fn()
	})
	if Gone(err) {
		return nil
	}
	return err
}

// Gone says whether err, from opening a namespace by name or path, means
// no namespace is there any more: nothing at the path, or a file that is
// no namespace (a bind mount's target left behind once the namespace was
// unmounted).
func Gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrNotNetns)
}
