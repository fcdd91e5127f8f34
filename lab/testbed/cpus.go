package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/netns"
	"golang.org/x/sys/unix"
)

// The testbed's CPUs: where the sending host's receive work and the
// receiving host's NIC poll run, so that one machine plays two.

// KeepSenderHostOn points RPS of the sending host's wire end at
// the sender CPUs, in every mode alike.
//
// On two real machines the client's receive work (TCP ACKs, ping-pong
// replies) runs on the client's own cores. Here both hosts share the CPUs,
// and without this the ACKs of a flow whose receive stages falcon moved to
// another CPU would be processed there too; the sender then transmits from
// that CPU as well, its container veth queues segments on two backlogs, and
// TCP reorders its own packets (TCPOFOQueue and spurious retransmits, seen
// even in vanilla). Pinning the sending host's receive work to the sender
// CPUs keeps the client side what it is on a real testbed: somebody else's
// machine. The testbed is thrown away afterwards, so nothing is restored.
func (tb *Testbed) KeepSenderHostOn(cpus []int) error {
	h := tb.Hosts[0]
	mask := cpuset.Mask(cpus)
	return netns.WithSysfs(h.Netns, func(root string) error {
		queues, err := filepath.Glob(filepath.Join(root, "class/net", h.NIC, "queues/rx-*/rps_cpus"))
		if err != nil || len(queues) == 0 {
			return fmt.Errorf("no rx queues on %s in %s", h.NIC, h.Netns)
		}
		for _, q := range queues {
			if err := os.WriteFile(q, []byte(mask), 0); err != nil {
				return fmt.Errorf("set %s: %w", strings.TrimPrefix(q, root), err)
			}
		}
		return nil
	})
}

// NICPin runs the receiving host's NIC poll on one CPU.
//
// A veth has no interrupt: its NAPI poll runs on the CPU that transmitted
// into it, the senders'. RPS on the receiving end could move what follows
// the poll, but not the poll itself (GRO, and the XDP program of
// falcon+split). Threaded NAPI does: the poll becomes a kernel thread
// (napi/<dev>-<id>), which is pinned to the NIC CPU, so GRO, XDP and the
// first softirq stage run there, as on a core that takes a real NIC's
// interrupts. The kernel accounts the poll itself as system time of that
// CPU, not softirq. The threads go with the testbed.
type NICPin struct {
	cpu     int
	threads []string // the comm names of the NIC's NAPI threads
}

// PinNIC makes the NIC of the receiving host threaded and pins its NAPI
// threads to cpu. The testbed is thrown away afterwards, so nothing is
// restored.
func (tb *Testbed) PinNIC(cpu int) (*NICPin, error) {
	h := tb.Hosts[1] // the receiving host, the modes' (lab/modes)
	prefix := "napi/" + h.NIC + "-"
	before, err := napiThreads(prefix)
	if err != nil {
		return nil, err
	}
	err = netns.WithSysfs(h.Netns, func(root string) error {
		p := filepath.Join(root, "class/net", h.NIC, "threaded")
		if err := os.WriteFile(p, []byte("1"), 0); err != nil {
			return fmt.Errorf("threaded NAPI on %s in %s: %w (needs Linux 5.12)", h.NIC, h.Netns, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	after, err := napiThreads(prefix)
	if err != nil {
		return nil, err
	}
	p := &NICPin{cpu: cpu}
	for name := range after {
		if _, old := before[name]; !old {
			p.threads = append(p.threads, name)
		}
	}
	if len(p.threads) == 0 {
		return nil, fmt.Errorf("%s in %s runs no NAPI thread after threaded NAPI was turned on (GRO off?)", h.NIC, h.Netns)
	}
	return p, p.Ensure()
}

// Ensure pins the NIC's NAPI threads again, before each run: a mode that
// re-creates the device's NAPI (a GRO toggle) starts a new thread of the
// same name with every CPU allowed.
func (p *NICPin) Ensure() error {
	now, err := napiThreads("napi/")
	if err != nil {
		return err
	}
	var set unix.CPUSet
	set.Set(p.cpu)
	for _, name := range p.threads {
		pid, ok := now[name]
		if !ok {
			return fmt.Errorf("the NIC's NAPI thread %s is gone", name)
		}
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return fmt.Errorf("pin NAPI thread %s (pid %d) to CPU %d: %w", name, pid, p.cpu, err)
		}
	}
	return nil
}

// napiThreads maps the comm name of every kernel thread whose name starts
// with prefix to its pid. NAPI thread names carry the NAPI id, which is
// unique on the machine, so a name found once names the same poll later.
func napiThreads(prefix string) (map[string]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue // exited meanwhile
		}
		if name := strings.TrimSpace(string(b)); strings.HasPrefix(name, prefix) {
			out[name] = pid
		}
	}
	return out, nil
}
