package stagetrace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

func TestCostSub(t *testing.T) {
	k := CostKey{NetnsInode: 7, Ifindex: 2, CPU: 1}
	idle := CostKey{NetnsInode: 7, Ifindex: 3}
	prev := CostSnapshot{Lost: 1, Records: []CostRecord{
		{CostKey: k, Cost: Cost{Ns: 100, SKBs: 2, Segs: 4}},
		{CostKey: idle, Cost: Cost{Ns: 5, SKBs: 1, Segs: 1}},
	}}
	other := CostKey{Ifindex: CostOther}
	now := CostSnapshot{Lost: 1, Records: []CostRecord{
		{CostKey: k, Dev: "eth0", Cost: Cost{Ns: 250, SKBs: 5, Segs: 10, UntimedSegs: 1}},
		{CostKey: idle, Cost: Cost{Ns: 5, SKBs: 1, Segs: 1}},
		{CostKey: other, Cost: Cost{Ns: 9}},
	}}
	d := now.Sub(prev)
	want := []CostRecord{{CostKey: k, Dev: "eth0", Cost: Cost{Ns: 150, SKBs: 3, Segs: 6, UntimedSegs: 1}},
		{CostKey: other, Cost: Cost{Ns: 9}}}
	if fmt.Sprint(d.Records) != fmt.Sprint(want) || d.Lost != 0 {
		t.Errorf("delta %+v, want %+v", d, want)
	}
	if other.Special() != "other" || (CostKey{}).Special() != "backlog" || k.Special() != "" {
		t.Error("special keys misnamed")
	}
}

// A full-rate UDP flow from a container on h1 to one on h2 of a docker
// testbed costs NET_RX time at h2's wire, its VXLAN device and the
// container's eth0, at a plausible price per segment, and no CPU is
// charged more than the window's wall time.
func TestCostTestbed(t *testing.T) {
	labtest.NeedRoot(t)
	if testing.Short() {
		t.Skip("builds a testbed and sends traffic")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("no kernel BTF, so no tp_btf:", err)
	}
	if err := workload.CheckTools("iperf3", "taskset"); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("sc%d", os.Getpid()), Layout: "docker", Containers: 1})
	h2 := tb.Hosts[1]
	cl, sv := tb.Hosts[0].Containers[0], h2.Containers[0]
	sender, receiver := []int{0}, []int{runtime.NumCPU() - 1}

	ct, err := StartCost()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ct.Close(); err != nil {
			t.Error(err)
		}
		assertNoCostPrograms(t)
	}()
	const port, size = 5301, 1400
	srv, err := workload.StartIperf3Server(ctx, sv.Netns, port, receiver)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	start := time.Now()
	before, err := ct.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	res, err := workload.RunIperf3(ctx, workload.Iperf3Opts{Netns: cl.Netns, Addr: sv.Addr, Port: port, UDP: true,
		Size: size, Duration: 3 * time.Second, CPUs: sender})
	if err != nil {
		t.Fatal(err)
	}
	after, err := ct.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	d := after.Sub(before)
	t.Logf("iperf3 UDP %d B: %.0f Mbit/s received; window %s", size, res.BitsPerSecond/1e6, wall.Round(time.Millisecond))

	checkCosts(t, d, wall, h2.Netns+"/"+h2.NIC, h2.Netns+"/"+h2.Overlay, sv.Netns+"/"+sv.Dev)
}

// checkCosts: each of the stages (netns/dev) was charged time and
// segments, at a plausible cost per segment; no CPU was charged more than
// the window, and no charge was lost.
func checkCosts(t *testing.T, d CostSnapshot, wall time.Duration, want ...string) {
	t.Helper()
	perCPU := map[int]uint64{}
	stages := map[string]Cost{}
	for _, r := range d.Records {
		perCPU[r.CPU] += r.Ns
		what := r.Special()
		if what == "" {
			what = r.Netns + "/" + r.Dev
		}
		c := stages[what]
		c.Ns, c.SKBs, c.Segs, c.UntimedSegs = c.Ns+r.Ns, c.SKBs+r.SKBs, c.Segs+r.Segs, c.UntimedSegs+r.UntimedSegs
		stages[what] = c
		t.Logf("%-40s CPU %d: %+v", what, r.CPU, r.Cost)
	}
	for _, st := range want {
		c := stages[st]
		if c.Ns == 0 || c.Segs == 0 {
			t.Errorf("%s: %+v, want time and segments", st, c)
			continue
		}
		per := float64(c.Ns) / float64(c.Segs-c.UntimedSegs)
		t.Logf("%s: %.0f ns/segment (%.2f segments/skb)", st, per, float64(c.Segs)/float64(c.SKBs))
		if per < 50 || per > 50000 {
			t.Errorf("%s: %.0f ns per segment, outside 50 ns .. 50 µs", st, per)
		}
	}
	for cpu, ns := range perCPU {
		t.Logf("CPU %d: %.1f%% of the window in NET_RX", cpu, 100*float64(ns)/float64(wall.Nanoseconds()))
		if time.Duration(ns) > wall {
			t.Errorf("CPU %d charged %s in a window of %s", cpu, time.Duration(ns), wall)
		}
	}
	if d.Lost != 0 {
		t.Errorf("%d charges lost", d.Lost)
	}
}

// assertNoCostPrograms checks that Close left none of the tracer's
// programs in the kernel. The kernel frees a raw tracepoint link's program
// after an RCU tasks grace period, so give it a moment.
func assertNoCostPrograms(t *testing.T) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if left = costPrograms(t); len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("programs left loaded: %v", left)
			return
		}
	}
}

func costPrograms(t *testing.T) []string {
	var out []string
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err == nil && strings.HasPrefix(info.Name, "cost_") {
			out = append(out, fmt.Sprintf("%s (id %d)", info.Name, id))
		}
	}
}
