package hostpaths

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ShimSocket is where containerd 1.6's shim of container id in namespace
// ns listens: named after the SHA-256 of its containerd's address, the
// namespace and the id, in a directory shared by every containerd.
func ShimSocket(address, ns, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(address, ns, id)))
	return filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:]))
}

// StopShims kills the shims of the containerd at address, waits up to 5 s
// for them to be gone and removes their sockets. A shim outlives its
// daemons until its container is gone and removes its socket only when it
// exits by itself: one still exiting when the host paths are released
// keeps /run/containerd/s, which it then leaves empty.
func StopShims(address string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		flags := shimFlags(strings.Split(string(b), "\x00"))
		pid, perr := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || perr != nil || flags["-address"] != address {
			continue
		}
		syscall.Kill(pid, syscall.SIGKILL)
		pids = append(pids, pid)
		defer os.Remove(ShimSocket(address, flags["-namespace"], flags["-id"]))
	}
	for deadline := time.Now().Add(5 * time.Second); len(pids) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if Gone(pids[0]) {
			pids = pids[1:]
		}
	}
}

// shimFlags reads a containerd-shim-runc-v2 command line's "-flag value"
// pairs; nil for any other command.
func shimFlags(args []string) map[string]string {
	if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
		return nil
	}
	flags := map[string]string{}
	for i := 1; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags[args[i]] = args[i+1]
		}
	}
	return flags
}

// Gone says whether pid has exited: no process, or a zombie waiting for
// its parent. (The command name in /proc/PID/stat may hold spaces and
// parentheses: the state is the first field after the last ')'.)
func Gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] == "Z"
}
