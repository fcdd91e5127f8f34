package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cpuset"
	"golang.org/x/sys/unix"
)

// TestPinNIC: the receiving host's NIC poll becomes a kernel thread pinned
// to the NIC CPU, which does the NIC's receive work (its CPU time grows
// under traffic), and Ensure pins it again after a GRO toggle re-created
// the thread with every CPU allowed.
func TestPinNIC(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: traffic through a pinned poll")
	}
	needRoot(t)
	online, err := cpuset.Online()
	if err != nil {
		t.Fatal(err)
	}
	nic := online[len(online)-1]
	tb := up(t, Spec{Name: tbName("n"), Layout: "docker", Containers: 1})
	p, err := tb.PinNIC(nic)
	if err != nil {
		t.Fatal(err)
	}
	h := tb.Hosts[1]
	if len(p.threads) == 0 || !strings.HasPrefix(p.threads[0], "napi/"+h.NIC+"-") {
		t.Fatalf("threads %v", p.threads)
	}
	affinity := func() (pid int, cpus []int) {
		t.Helper()
		now, err := napiThreads(p.threads[0])
		if err != nil || now[p.threads[0]] == 0 {
			t.Fatalf("thread %s: %v %v", p.threads[0], now, err)
		}
		pid = now[p.threads[0]]
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &set); err != nil {
			t.Fatal(err)
		}
		for _, c := range online {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
		return pid, cpus
	}
	pid, cpus := affinity()
	if !reflect.DeepEqual(cpus, []int{nic}) {
		t.Errorf("thread %s may run on %v, want only %d", p.threads[0], cpus, nic)
	}
	cpuTime := func(pid int) (ticks int64, last int) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
		u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
		s, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
		last, _ = strconv.Atoi(f[36])           // processor, field 39
		return u + s, last
	}
	before, _ := cpuTime(pid)
	clients, servers := tb.Endpoints()
	// UDP through the overlay: the wire carries it into the pinned poll.
	cmd := exec.Command("ip", "netns", "exec", clients[0].Netns, "ping", "-q", "-c", "20000", "-i", "0", "-s", "1000", servers[0].Addr)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	after, last := cpuTime(pid)
	if after <= before || last != nic {
		t.Errorf("NAPI thread: cpu time %d -> %d ticks, last on CPU %d; want it to have run, on %d", before, after, last, nic)
	}
	// A GRO toggle re-creates the poll and its thread, unpinned.
	for _, v := range []string{"off", "on"} {
		if out, err := exec.Command("ip", "netns", "exec", h.Netns, "ethtool", "-K", h.NIC, "gro", v).CombinedOutput(); err != nil {
			t.Fatalf("gro %s: %v %s", v, err, out)
		}
	}
	if err := p.Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, cpus := affinity(); !reflect.DeepEqual(cpus, []int{nic}) {
		t.Errorf("after a GRO toggle and ensure: thread may run on %v, want only %d", cpus, nic)
	}
}
