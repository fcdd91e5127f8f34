package netns

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// initPidIno is the initial PID namespace's inode (the kernel's
// PROC_PID_INIT_INO): only from there does /proc show every process.
const initPidIno = 0xEFFFFFFC

// Live lists the inodes of every network namespace that something keeps
// alive: a task in it, a descriptor open on it, a bind mount of it in any
// mount namespace. A namespace not in the list no longer exists, except one
// held only by a socket whose process has moved on, which nothing can
// reach by name or path anyway. It refuses to answer where /proc does not
// show every process (a container without the host's PID namespace):
// there a namespace would look gone that is not.
func Live() (map[uint64]bool, error) {
	if pid, err := os.Readlink("/proc/self/ns/pid"); err != nil || pid != "pid:["+strconv.Itoa(initPidIno)+"]" {
		return nil, errors.New("not in the initial PID namespace: cannot see every process, so cannot tell which network namespaces are gone")
	}
	live := map[uint64]bool{}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	mountNS := map[string]bool{}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name())
		// Threads may each have joined a namespace of their own (setns).
		tasks, _ := filepath.Glob(filepath.Join(dir, "task", "*", "ns", "net"))
		for _, t := range tasks {
			var st unix.Stat_t
			if unix.Stat(t, &st) == nil {
				live[st.Ino] = true
			}
		}
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil {
				addNetIno(live, l)
			}
		}
		// Each mount namespace's bind mounts, read once through one of its
		// processes.
		if mnt, err := os.Readlink(filepath.Join(dir, "ns", "mnt")); err == nil && !mountNS[mnt] {
			mountNS[mnt] = true
			addMountedNetns(live, filepath.Join(dir, "mountinfo"))
		}
	}
	return live, nil
}

// addNetIno adds the inode of a "net:[INODE]" link or mount root.
func addNetIno(live map[uint64]bool, s string) {
	if rest, ok := strings.CutPrefix(s, "net:["); ok {
		if ino, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64); err == nil {
			live[ino] = true
		}
	}
}

// addMountedNetns adds the network namespaces mounted in a mountinfo file.
func addMountedNetns(live map[uint64]bool, mountinfo string) {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 3 {
			addNetIno(live, f[3])
		}
	}
}
