package cause

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Apps finds the CPUs that run the receiving applications: the tasks that
// hold a socket of the containers' namespaces (UDP sockets, and TCP ones
// established), found by socket inode in /proc/*/fd, each task that ran
// since the last look (its schedstat run time grew) at the CPU it last ran
// on (/proc/PID/task/TID/stat field 39), remembered for appMemory. Listing the sockets walks the
// kernel's socket tables and mapping them to processes every process's
// descriptors, so both run at most every rescanEvery; each turn reads only
// the holders' tasks (BenchmarkApps).
type Apps struct {
	owners map[uint64][]int // socket inode -> PIDs
	pids   []int            // the sockets' holders at the last listing
	listed time.Time
	err    error          // the last listing's
	ran    map[int]uint64 // TID -> run time ns at the last look
	seen   map[int]time.Time
	// fresh, newSockets: a listing ran since Fresh was last asked, and it
	// found a socket the listing before did not have.
	fresh, newSockets bool
	inodes            []uint64 // the last listing's
}

// appMemory: a CPU that ran a receiver stays the receiver's this long. A
// receiver between two reads (or briefly blocked) runs on no CPU, and its
// CPU must not pass for free then.
const appMemory = 2 * time.Second

const rescanEvery = 2 * time.Second

// CPUs returns the receiving applications' CPUs in namespaces nss. An
// error says the causes cannot be read (the agent then tests by A/B): a
// namespace unreadable, or sockets no visible process holds (another PID
// namespace).
func (a *Apps) CPUs(nss []string) ([]int, error) {
	if time.Since(a.listed) >= rescanEvery {
		a.list(nss)
	}
	if a.err != nil {
		return nil, a.err
	}
	now := time.Now()
	if a.seen == nil {
		a.seen = map[int]time.Time{}
	}
	for _, c := range a.ranOn(a.pids) {
		a.seen[c] = now
	}
	out := []int{}
	for c, at := range a.seen {
		if now.Sub(at) <= appMemory {
			out = append(out, c)
		} else {
			delete(a.seen, c)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Relist makes the next CPUs list the sockets afresh: a flow began, and
// its socket may be newer than the last listing.
func (a *Apps) Relist() { a.listed = time.Time{} }

// Fresh says whether the sockets were listed since the last call, and
// whether that listing found sockets the one before did not have (a new
// flow's); cause.Window's Listed and NewSockets.
func (a *Apps) Fresh() (listed, newSockets bool) {
	listed, newSockets = a.fresh, a.newSockets
	a.fresh, a.newSockets = false, false
	return listed, newSockets
}

// list finds the sockets' holders.
func (a *Apps) list(nss []string) {
	a.listed, a.pids, a.err = time.Now(), nil, nil
	var inodes []uint64
	defer func() {
		a.fresh = a.err == nil
		a.newSockets = a.newSockets || (a.fresh && slices.ContainsFunc(inodes, func(i uint64) bool { return !slices.Contains(a.inodes, i) }))
		a.inodes = inodes
	}()
	for _, ns := range nss {
		err := netns.Do(ns, func() error {
			ino, err := socketInodes()
			inodes = append(inodes, ino...)
			return err
		})
		if err != nil {
			a.err = err
			return
		}
	}
	if a.unknown(inodes) {
		a.owners = scanOwners()
		for _, ino := range inodes {
			if _, ok := a.owners[ino]; !ok {
				// Held by no process (a kernel socket: a VXLAN device's
				// in a host namespace): known now, not to scan for again.
				a.owners[ino] = nil
			}
		}
	}
	for _, ino := range inodes {
		for _, p := range a.owners[ino] {
			if !slices.Contains(a.pids, p) {
				a.pids = append(a.pids, p)
			}
		}
	}
	if len(inodes) > 0 && len(a.pids) == 0 {
		a.err = errors.New("no visible process holds the containers' sockets")
	}
}

func (a *Apps) unknown(inodes []uint64) bool {
	for _, ino := range inodes {
		if _, ok := a.owners[ino]; !ok {
			return true
		}
	}
	return false
}

// socketInodes lists the inodes of the namespace's UDP sockets and its
// established TCP ones (not listeners), by sock_diag: /proc/net/tcp walks
// the whole established hash (262,144 buckets with 24 GiB), about 1 ms a
// read on 2 vCPUs, where the netlink dump skips empty buckets.
func socketInodes() ([]uint64, error) {
	var out []uint64
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		udp, err := netlink.SocketDiagUDP(family)
		if err != nil {
			return nil, err
		}
		tcp, err := netlink.SocketDiagTCP(family)
		if err != nil {
			return nil, err
		}
		for _, s := range udp {
			out = append(out, uint64(s.INode))
		}
		for _, s := range tcp {
			if s.State == tcpEstablished {
				out = append(out, uint64(s.INode))
			}
		}
	}
	return out, nil
}

const tcpEstablished = 1

// scanOwners maps every socket inode to the processes holding it.
func scanOwners() map[uint64][]int {
	out := map[uint64][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			if ino, err := strconv.ParseUint(strings.TrimSuffix(l[8:], "]"), 10, 64); err == nil && !slices.Contains(out[ino], pid) {
				out[ino] = append(out[ino], pid)
			}
		}
	}
	return out
}

// ranOn: the CPUs that the processes' tasks which ran since the last look
// last ran on.
func (a *Apps) ranOn(pids []int) []int {
	seen := map[int]uint64{}
	out := []int{}
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			tid, _ := strconv.Atoi(t.Name())
			run, cpu, ok := taskRun(filepath.Join(dir, t.Name()))
			if !ok {
				continue
			}
			seen[tid] = run
			if prev, had := a.ran[tid]; (!had || run > prev) && !slices.Contains(out, cpu) {
				out = append(out, cpu)
			}
		}
	}
	a.ran = seen
	slices.Sort(out)
	return out
}

// taskRun: a task's run time (schedstat, ns) and the CPU it last ran on.
func taskRun(dir string) (run uint64, cpu int, ok bool) {
	ss, err1 := os.ReadFile(filepath.Join(dir, "schedstat"))
	st, err2 := os.ReadFile(filepath.Join(dir, "stat"))
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	if f := strings.Fields(string(ss)); len(f) > 0 {
		run, _ = strconv.ParseUint(f[0], 10, 64)
	}
	cpu, ok = Processor(st)
	return run, cpu, ok
}

// Processor is field 39 of /proc/PID/stat, the CPU the task last ran on;
// the fields count from after the command name, which may hold spaces.
func Processor(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 37 { // field 3 is f[0]: field 39 is f[36]
		return 0, false
	}
	n, err := strconv.Atoi(f[36])
	return n, err == nil
}
