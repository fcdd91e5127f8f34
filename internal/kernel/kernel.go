// Package kernel reads what the running kernel is: its release, and
// whether tracefs is mounted. doctor and the bench probe both judge a
// machine by them.
package kernel

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release is a kernel release ("6.18.44-fc-v669") with its version.
type Release struct {
	Name         string
	Major, Minor int
}

func (k Release) String() string { return k.Name }

// AtLeast says whether the release is major.minor or newer.
func (k Release) AtLeast(major, minor int) bool {
	return k.Major > major || k.Major == major && k.Minor >= minor
}

// Running returns the release of the running kernel.
func Running() (Release, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Release{}, err
	}
	return ParseRelease(unix.ByteSliceToString(u.Release[:]))
}

// ParseRelease reads a release as uname -r prints it.
func ParseRelease(rel string) (Release, error) {
	k := Release{Name: rel}
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return k, fmt.Errorf("cannot parse kernel release %q", rel)
	}
	var err1, err2 error
	k.Major, err1 = strconv.Atoi(parts[0])
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i] // "15-rc1"
	}
	k.Minor, err2 = strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return k, fmt.Errorf("cannot parse kernel release %q", rel)
	}
	return k, nil
}

const tracefsDir, debugTrace = "/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"

// TracefsMounted says whether tracefs is mounted, where it belongs or
// under debugfs.
func TracefsMounted() bool {
	for _, p := range []string{tracefsDir, debugTrace} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}
