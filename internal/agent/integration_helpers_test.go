package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
)

// needTestbed is needRoot for the tests that run traffic over a testbed.
func needTestbed(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds testbeds and runs traffic")
	}
	needRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
}

// needSplit skips where this kernel cannot run the split programs
// (datapath.SplitSupported says why).
func needSplit(t *testing.T) {
	t.Helper()
	if err := datapath.SplitSupported(); err != nil {
		t.Skip(err)
	}
}

// ibed builds a testbed named after the pid and tag, taken down when the
// test ends, also on failure.
func ibed(t *testing.T, tag, layout string, containers int) *testbed.Testbed {
	t.Helper()
	// "docker-ipv6": the layout over IPv6 only.
	return labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("i%d%s", os.Getpid(), tag), Layout: layout, Containers: containers})
}

// startAgent starts an agent with o; it is stopped when the test ends
// unless the test stopped it with stop, whose error the test checks.
func startAgent(ctx context.Context, t *testing.T, o Options) (a *Agent, stop func() error) {
	t.Helper()
	a, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			a.Stop()
		}
	})
	return a, func() error { stopped = true; return a.Stop() }
}

// hostSide lists a host's namespace and its containers' namespaces.
func hostSide(h testbed.Host) []string {
	nss := []string{h.Netns}
	for _, c := range h.Containers {
		nss = append(nss, c.Netns)
	}
	if h.Sandbox != "" {
		// Docker's sandboxes: the networks' (the overlay's and the
		// ingress's), ingress_sbox and the load balancers' ends; the
		// containers' own are there too, under Docker's names.
		seen := map[uint64]bool{}
		for _, ns := range nss {
			if ino, err := netns.Inode(ns); err == nil {
				seen[ino] = true
			}
		}
		sb, _ := filepath.Glob(filepath.Join(filepath.Dir(h.Sandbox), "*"))
		for _, p := range sb {
			if ino, err := netns.Inode(p); err == nil && !seen[ino] {
				seen[ino] = true
				nss = append(nss, p)
			}
		}
	}
	return nss
}

// queueValues reads rps_cpus and rps_flow_cnt of every receive queue of
// every device in the namespaces, keyed "netns:path". (The global
// rps_sock_flow_entries is left out: tests beside this one change it.)
func queueValues(t *testing.T, nss []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range nss {
		err := netns.WithSysfs(ns, func(root string) error {
			for _, attr := range []string{"rps_cpus", "rps_flow_cnt"} {
				ps, err := filepath.Glob(filepath.Join(root, "class/net/*/queues/rx-*", attr))
				if err != nil {
					return err
				}
				for _, p := range ps {
					b, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					out[ns+":"+p] = strings.TrimSpace(string(b))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func sameValues(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	for k := range keys {
		if before[k] != after[k] {
			t.Errorf("%s: %s = %q, was %q", what, k, after[k], before[k])
		}
	}
	if len(before) < 4 {
		t.Errorf("%s: only %d values read, the snapshot proves nothing", what, len(before))
	}
}

// warm pings every server from every client, so that no packet of the
// flows under test waits for neighbour resolution (such packets leave on
// the CPU that got the ARP answer, not the sender's).
func warm(t *testing.T, tb *testbed.Testbed) {
	t.Helper()
	clients, servers := tb.Endpoints()
	for _, c := range clients {
		for _, s := range servers {
			out, err := exec.Command("ip", "netns", "exec", c.Netns, "ping", "-c", "1", "-W", "5", s.Addr).CombinedOutput()
			if err != nil {
				t.Fatalf("ping %s from %s: %v\n%s", s.Addr, c.Netns, err, out)
			}
		}
	}
}

// flowRun is what one sequenced flow saw at the receiver.
type flowRun struct {
	server int // index of the server container on h2
	stats  seqcheck.Stats
}

// sendPairs sends the flows of so (Flows, PktsPerFlow, Size, Pause) from the
// i-th client container to the i-th server container on port, all pairs at
// once, every sender pinned to so.CPU (CPU 0 unless set), and returns what
// arrived, by flow.
func sendPairs(ctx context.Context, t *testing.T, tb *testbed.Testbed, port uint16, so seqcheck.SendOptions) map[stagetrace.Flow]flowRun {
	t.Helper()
	return streamPairs(ctx, ctx, t, tb, port, so, 0)
}

// streamPairs is sendPairs whose senders stop early when sendCtx ends; the
// receivers then give up after idle without a datagram (0: a second), and
// what was not sent counts as lost.
func streamPairs(ctx, sendCtx context.Context, t *testing.T, tb *testbed.Testbed, port uint16, so seqcheck.SendOptions,
	idle time.Duration) map[stagetrace.Flow]flowRun {
	t.Helper()
	clients, servers := tb.Endpoints()
	n := min(len(clients), len(servers))
	type result struct {
		got map[netip.AddrPort]seqcheck.Stats
		err error
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		dst := netip.MustParseAddr(servers[i].Addr)
		r, err := seqcheck.Listen(servers[i].Netns, dst, port)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		wg.Add(2)
		go func() {
			defer wg.Done()
			res[i].got, res[i].err = r.Wait(ctx, idle)
		}()
		go func() {
			defer wg.Done()
			o := so
			o.Netns, o.Dst, o.Port = clients[i].Netns, dst, port
			err := seqcheck.Send(sendCtx, o)
			if err != nil && sendCtx.Err() == nil {
				t.Errorf("send to %s: %v", dst, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	out := map[stagetrace.Flow]flowRun{}
	for i, r := range res {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.got) != so.Flows {
			t.Fatalf("pair %d: %d flows arrived, want %d", i, len(r.got), so.Flows)
		}
		dst := netip.MustParseAddr(servers[i].Addr)
		for from, s := range r.got {
			f := stagetrace.Flow{Proto: 17, Src: from.Addr().Unmap(), Dst: dst, Sport: from.Port(), Dport: port}
			out[f] = flowRun{server: i, stats: s}
		}
	}
	return out
}

// orderOf sums the runs of streamPairs and logs each flow that arrived out
// of order, with when (to line up with the agent's log).
func orderOf(t *testing.T, runs map[stagetrace.Flow]flowRun) (received, reordered uint64) {
	t.Helper()
	for f, r := range runs {
		received += r.stats.Received
		bad := r.stats.Reordered + r.stats.Duplicates
		reordered += bad
		if bad == 0 {
			continue
		}
		var at []string
		for _, when := range r.stats.ReorderedAt {
			at = append(at, when.UTC().Format("15:04:05.000"))
		}
		t.Logf("%s: %d reordered, %d duplicated of %d, at %s", f, r.stats.Reordered, r.stats.Duplicates,
			r.stats.Received, strings.Join(at, " "))
	}
	return received, reordered
}

// bpfObjects are the kernel objects of a running datapath, by ID: they
// outlive every name and path, so their IDs tell whether disable freed
// them.
type bpfObjects struct {
	links   []link.ID
	filters int // cls_bpf filters of clsact qdiscs (kernels without tcx)
	progs   []ebpf.ProgramID
	maps    []ebpf.MapID
}

// falconObjects collects the tcx links (or, without tcx, the cls_bpf
// filters) and programs named falcon_* on the devices of the namespaces,
// and the maps those programs use.
func falconObjects(t *testing.T, nss []string) bpfObjects {
	t.Helper()
	var o bpfObjects
	seenMap := map[ebpf.MapID]bool{}
	for _, ns := range nss {
		err := netns.Do(ns, func() error {
			links, err := netlink.LinkList()
			if err != nil {
				return err
			}
			// add records a falcon_* program and its maps; false for another.
			add := func(id ebpf.ProgramID) bool {
				prog, err := ebpf.NewProgramFromID(id)
				if err != nil {
					return false
				}
				info, err := prog.Info()
				prog.Close()
				if err != nil || !strings.HasPrefix(info.Name, "falcon_") {
					return false
				}
				o.progs = append(o.progs, id)
				ids, _ := info.MapIDs()
				for _, id := range ids {
					if !seenMap[id] {
						seenMap[id] = true
						o.maps = append(o.maps, id)
					}
				}
				return true
			}
			for _, l := range links {
				for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
					res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
					if err != nil {
						continue
					}
					for _, p := range res.Programs {
						if !add(p.ID) {
							continue
						}
						if lid, ok := p.LinkID(); ok {
							o.links = append(o.links, lid)
						}
					}
				}
				// Before tcx (6.6) the programs sit in cls_bpf filters of a
				// clsact qdisc: a filter is their attachment.
				for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
					fs, err := netlink.FilterList(l, parent)
					if err != nil {
						continue
					}
					for _, f := range fs {
						if bf, ok := f.(*netlink.BpfFilter); ok && bf.Id > 0 && add(ebpf.ProgramID(bf.Id)) {
							o.filters++
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// gone waits until none of the objects exists any more. The kernel frees a
// program, and then its maps, after an RCU grace period and a work item,
// so this waits for that; the deadline only guards against a hang.
func (o bpfObjects) gone(t *testing.T) {
	t.Helper()
	left := func() []string {
		var s []string
		for _, id := range o.links {
			if l, err := link.NewFromID(id); err == nil {
				l.Close()
				s = append(s, fmt.Sprintf("link %d", id))
			}
		}
		for _, id := range o.progs {
			if p, err := ebpf.NewProgramFromID(id); err == nil {
				p.Close()
				s = append(s, fmt.Sprintf("program %d", id))
			}
		}
		for _, id := range o.maps {
			if m, err := ebpf.NewMapFromID(id); err == nil {
				m.Close()
				s = append(s, fmt.Sprintf("map %d", id))
			}
		}
		return s
	}
	deadline := time.Now().Add(20 * time.Second)
	for l := left(); len(l) > 0; l = left() {
		if time.Now().After(deadline) {
			t.Errorf("still in the kernel after disable: %s", strings.Join(l, ", "))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noFilters fails if any device of the namespaces has a tc filter or a
// clsact/ingress qdisc.
func noFilters(t *testing.T, nss []string) {
	t.Helper()
	for _, ns := range nss {
		var devs []string
		err := netns.Do(ns, func() error {
			links, err := netlink.LinkList()
			for _, l := range links {
				devs = append(devs, l.Attrs().Name)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devs {
			for _, dir := range []string{"ingress", "egress"} {
				out, err := exec.Command("tc", "-n", ns, "filter", "show", "dev", d, dir).CombinedOutput()
				if s := strings.TrimSpace(string(out)); err == nil && s != "" {
					t.Errorf("%s %s: %s filter left:\n%s", ns, d, dir, s)
				}
			}
		}
		out, _ := exec.Command("tc", "-n", ns, "qdisc", "show").CombinedOutput()
		if strings.Contains(string(out), "clsact") || strings.Contains(string(out), "qdisc ingress") {
			t.Errorf("%s: qdisc left:\n%s", ns, out)
		}
	}
}

// noPaths fails if any of the paths exists.
func noPaths(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			out, _ := exec.Command("find", p).CombinedOutput()
			t.Errorf("%s left behind (%v):\n%s", p, err, out)
		}
	}
}

func sortedFlows(m map[stagetrace.Flow]flowRun) []stagetrace.Flow {
	fs := make([]stagetrace.Flow, 0, len(m))
	for f := range m {
		fs = append(fs, f)
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].String() < fs[j].String() })
	return fs
}

func devIfindex(t *testing.T, ns, dev string) int {
	t.Helper()
	var idx int
	err := netns.Do(ns, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		idx = l.Attrs().Index
		return nil
	})
	if err != nil {
		t.Fatalf("%s in %s: %v", dev, ns, err)
	}
	return idx
}
