package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

func needRoot(t *testing.T) {
	t.Helper()
	labtest.NeedTestbeds(t)
	if err := datapath.Supported(); err != nil {
		t.Skip(err)
	}
}

// bed builds a testbed removed when the test ends.
func bed(t *testing.T, layout string, containers int) *testbed.Testbed {
	t.Helper()
	name := fmt.Sprintf("a%d%s", os.Getpid(), strings.ReplaceAll(strings.ToLower(t.Name()), "/", ""))
	name = name[:min(len(name), 20)]
	return labtest.Testbed(t, testbed.Spec{Name: name, Layout: layout, Containers: containers})
}

// testOptions keep the test's state and pins apart from a real agent's.
func testOptions(t *testing.T, ns string) Options {
	o := DefaultOptions()
	o.Netns = ns
	o.StateRoot = filepath.Join(t.TempDir(), "run")
	o.PinRoot = filepath.Join(datapath.BPFFS, fmt.Sprintf("falcon-test-%d", os.Getpid()))
	o.Log = testLog(t)
	// A guest under emulation runs its queues many times slower than the
	// guard timeout assumes (scripts/kernels/guest.sh).
	if v := os.Getenv("FALCON_TEST_GUARD_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("FALCON_TEST_GUARD_TIMEOUT: %v", err)
		}
		o.GuardTimeout = d
	}
	t.Cleanup(func() { os.Remove(o.PinRoot) })
	return o
}

// testLog writes the agent's log lines to the test's log.
func testLog(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(testWriter{t}, nil)) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// snapshot reads every RPS/RFS value of the overlay's devices, host and
// container side, keyed by namespace and path.
func snapshot(t *testing.T, ov *discover.Overlay) map[string]string {
	t.Helper()
	out := map[string]string{}
	byNS := map[string][]discover.Device{}
	for _, d := range ov.Devices {
		byNS[d.Netns] = append(byNS[d.Netns], d)
	}
	for ns, devs := range byNS {
		err := netns.WithSysfs(ns, func(string) error {
			for _, d := range devs {
				for _, attr := range []string{"rps_cpus", "rps_flow_cnt"} {
					qs, err := QueuePaths(d.Name, attr)
					if err != nil {
						return err
					}
					for _, p := range qs {
						b, err := os.ReadFile(p)
						if err != nil {
							return err
						}
						out[ns+":"+p] = strings.TrimSpace(string(b))
					}
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

func read(t *testing.T, ns, path string) string {
	t.Helper()
	var v string
	err := netns.WithSysfs(ns, func(string) error {
		b, err := os.ReadFile(path)
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func write(t *testing.T, ns, path, v string) {
	t.Helper()
	if err := netns.WithSysfs(ns, func(string) error { return os.WriteFile(path, []byte(v), 0) }); err != nil {
		t.Fatal(err)
	}
}

// noTrace fails if falcon left a BPF program, filter, qdisc, pin or state
// anywhere on the testbed.
func noTrace(t *testing.T, tb *testbed.Testbed, o Options) {
	t.Helper()
	for _, ns := range tb.Namespaces() {
		if out := attached(t, ns); strings.Contains(out, "falcon") {
			t.Errorf("BPF program left in %s:\n%s", ns, out)
		}
		out, _ := exec.Command("tc", "-n", ns, "qdisc", "show").CombinedOutput()
		if strings.Contains(string(out), "clsact") {
			t.Errorf("clsact qdisc left in %s:\n%s", ns, out)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(o.pinRoot(), "*", "falcon_*")); len(m) > 0 {
		t.Errorf("pins left: %v", m)
	}
	if ents, err := os.ReadDir(o.stateRoot()); err == nil && len(ents) > 0 {
		out, _ := exec.Command("find", o.stateRoot()).CombinedOutput()
		t.Errorf("state left in %s: %v\n%s", o.stateRoot(), ents, out)
	}
}

// attached lists the BPF programs attached in namespace ns, by tcx or as
// cls_bpf filters (bpftool 7.1 does not show tcx).
func attached(t *testing.T, ns string) string {
	t.Helper()
	var b strings.Builder
	err := netns.Do(ns, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
				if err != nil {
					continue
				}
				for _, p := range res.Programs {
					prog, err := ebpf.NewProgramFromID(p.ID)
					if err != nil {
						continue
					}
					if info, err := prog.Info(); err == nil {
						fmt.Fprintf(&b, "%s tcx %v %s\n", l.Attrs().Name, at, info.Name)
					}
					prog.Close()
				}
			}
			// Before tcx (6.6) the programs sit in cls_bpf filters of a clsact qdisc.
			for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
				fs, err := netlink.FilterList(l, parent)
				if err != nil {
					continue
				}
				for _, f := range fs {
					if bf, ok := f.(*netlink.BpfFilter); ok {
						// The filter's name is the attacher's; the program's, as tcx lists it.
						name := bf.Name
						if prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(bf.Id)); err == nil {
							if info, err := prog.Info(); err == nil {
								name = info.Name
							}
							prog.Close()
						}
						fmt.Fprintf(&b, "%s clsact %#x %s\n", l.Attrs().Name, parent, name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("tc", "-n", ns, "filter", "show", "ingress").CombinedOutput()
	b.Write(out)
	return b.String()
}

func TestEnableStatusDisable(t *testing.T) {
	needRoot(t)
	for _, layout := range []string{"docker", "flannel", "calico", "vxlan"} {
		t.Run(layout, func(t *testing.T) {
			tb := bed(t, layout, 2)
			h := tb.Hosts[1]
			ov, err := discover.Discover(h.Netns)
			if err != nil {
				t.Fatal(err)
			}
			// Values that are not the defaults, so that a restore to the
			// defaults would be caught.
			if len(h.Containers) > 0 {
				c0 := h.Containers[0]
				write(t, c0.Netns, "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "32")
			}
			write(t, h.Netns, "/sys/class/net/"+h.NIC+"/queues/rx-0/rps_cpus", "1")
			before := snapshot(t, ov)

			o := testOptions(t, h.Netns)
			// No engagement test that stands down on this idle machine while
			// the test reads what enable set (standdown_test.go covers that).
			o.Policy = datapath.PolicyPaper
			a, err := Start(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					a.Stop()
				}
			}()
			mask := cpuset.Mask(a.Host().Opts.CPUs)
			if got := read(t, h.Netns, "/sys/class/net/"+h.Overlay+"/queues/rx-0/rps_cpus"); got != mask {
				t.Errorf("%s rps_cpus = %s, want %s", h.Overlay, got, mask)
			}
			for _, c := range h.Containers {
				if got := read(t, c.Netns, "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != mask {
					t.Errorf("%s eth0 rps_cpus = %s, want %s", c.Netns, got, mask)
				}
				if got := read(t, c.Netns, "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"); got != "0" {
					t.Errorf("%s eth0 rps_flow_cnt = %s, want 0", c.Netns, got)
				}
			}
			if got := read(t, h.Netns, "/sys/class/net/"+h.NIC+"/queues/rx-0/rps_cpus"); got != "1" {
				t.Errorf("NIC rps_cpus changed to %s", got)
			}

			r, err := Status(o)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Enabled || !r.Running || !r.Ready || r.Problem != "" {
				t.Errorf("status %+v", r)
			}
			roles := map[string]string{}
			for _, s := range r.Stages {
				roles[s.Device] = string(s.Role)
			}
			// No containers (vxlan layout): nothing behind the VXLAN device
			// to steer, so no hook there.
			hooks := 1
			if len(h.Containers) > 0 {
				hooks = 2
				if roles[h.Overlay] != "overlay" {
					t.Errorf("stages %+v, want %s as overlay", r.Stages, h.Overlay)
				}
			}
			if roles[h.NIC] != "nic" || len(r.Stages) != hooks {
				t.Errorf("stages %+v, want %s as nic and %d hooks", r.Stages, h.NIC, hooks)
			}
			if r.Load == nil || r.Load.Stale || len(r.Load.PerCPU) == 0 {
				t.Errorf("load %+v", r.Load)
			}
			if out := attached(t, h.Netns); strings.Count(out, "falcon_steer") != hooks {
				t.Errorf("want %d falcon_steer attachments in %s:\n%s", hooks, h.Netns, out)
			}

			stopped = true
			if err := a.Stop(); err != nil {
				t.Fatal(err)
			}
			after := snapshot(t, ov)
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s = %q after disable, was %q", k, after[k], v)
				}
			}
			noTrace(t, tb, o)
			r, err = Status(o)
			if err != nil || r.Enabled {
				t.Errorf("status after stop: %+v %v", r, err)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	h := tb.Hosts[1]
	plain := tb.Hosts[0].Containers[0].Netns // a namespace with no overlay
	ov, err := discover.Discover(h.Netns)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ov)
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"cpu", func(o *Options) { o.CPUs = []int{0, 4095} }, "CPU 4095 does not exist"},
		{"threshold", func(o *Options) { o.Threshold = 101 }, "outside 0..100"},
		{"netns", func(o *Options) { o.Netns = "fct-no-such-netns" }, "not found"},
		{"overlay", func(o *Options) { o.Netns = plain }, "no VXLAN overlay found"},
		{"devices", func(o *Options) { o.Devices = []string{"nosuchdev"} }, "nosuchdev"},
		{"mode", func(o *Options) { o.Mode = "warp" }, "mode \"warp\""},
	}
	for _, c := range cases {
		o := testOptions(t, h.Netns)
		c.mod(&o)
		a, err := Start(context.Background(), o)
		if err == nil {
			a.Stop()
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to say %q", c.name, err, c.want)
		}
		if _, err := os.Stat(o.stateRoot()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: state directory created", c.name)
		}
	}
	after := snapshot(t, ov)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed to %q, was %q", k, after[k], v)
		}
	}
}

// TestContainerAdded adds a container to a running agent's bridge; its
// eth0 must get falcon's RPS, and the original value back on disable.
func TestContainerAdded(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	// Attached throughout: adaptive stands down after 1 s with no CPU
	// busy, and off the path it sets no RPS until it comes back (in the
	// 6.1 guest under emulation the container came after that second).
	o.Policy = datapath.PolicyPaper
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	ns := fmt.Sprintf("fct%dnew", os.Getpid())
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	script := fmt.Sprintf(`ip netns add %[1]s
ip -n %[2]s link add vethnew%[3]d type veth peer name eth0 netns %[1]s
ip -n %[1]s link set eth0 up
ip -n %[2]s link set vethnew%[3]d master %[4]s up`, ns, h.Netns, os.Getpid()%10000, h.Bridge)
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	path := "/sys/class/net/eth0/queues/rx-0/rps_cpus"
	mask := cpuset.Mask(a.Host().Opts.CPUs)
	deadline := time.Now().Add(20 * time.Second) // a hang guard, not a timing assertion
	for read(t, ns, path) != mask {
		if time.Now().After(deadline) {
			t.Fatalf("new container's rps_cpus is %s, never %s", read(t, ns, path), mask)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, ns, path); got != "0" {
		t.Errorf("new container's rps_cpus = %s after disable, want 0", got)
	}
}

// TestContainerRemoved: a container that ends while the agent runs leaves
// no entry behind in the journal, and Stop still succeeds.
func TestContainerRemoved(t *testing.T) {
	needRoot(t)
	tb := bed(t, "calico", 2)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	o.Policy = datapath.PolicyPaper // attached throughout: no stand-down empties the journal first
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	c := h.Containers[1]
	n0 := len(a.Host().journal.Entries())
	if out, err := exec.Command("sh", "-c", "ip -n "+h.Netns+" link del "+c.HostVeth+" && ip netns del "+c.Netns).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for len(a.Host().journal.Entries()) == n0 {
		if time.Now().After(deadline) {
			t.Fatalf("journal kept the ended container's entries: %+v", a.Host().journal.Entries())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, e := range a.Host().journal.Entries() {
		if e.Netns == c.Netns {
			t.Errorf("entry of the ended container left: %+v", e)
		}
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestAlreadyEnabled(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	o := testOptions(t, tb.Hosts[1].Netns)
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if b, err := Start(context.Background(), o); !errors.Is(err, ErrRunning) {
		if err == nil {
			b.Stop()
		}
		t.Fatalf("second Start: %v, want ErrRunning", err)
	}
	if r, err := Status(o); err != nil || !r.Ready {
		t.Errorf("the first agent suffered: %+v %v", r, err)
	}
}

// TestKilledAgent kills an agent with SIGKILL, as the OOM killer would;
// Disable must then undo everything it left.
func TestKilledAgent(t *testing.T) {
	needRoot(t)
	tb := bed(t, "calico", 1)
	h := tb.Hosts[1]
	ov, err := discover.Discover(h.Netns)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ov)
	o := testOptions(t, h.Netns)
	cmd := helperAgent(t, o, "")
	cmd.Process.Kill()
	cmd.Wait()

	r, err := Status(o)
	if err != nil || !r.Enabled || r.Running || r.Ready || !strings.Contains(r.Problem, "falcon disable") {
		t.Errorf("status after kill: %+v %v", r, err)
	}
	if was, err := Disable(o); err != nil || !was {
		t.Fatalf("Disable: %v %v", was, err)
	}
	after := snapshot(t, ov)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s = %q after disable, was %q", k, after[k], v)
		}
	}
	noTrace(t, tb, o)
	if was, err := Disable(o); err != nil || was {
		t.Errorf("second Disable: %v %v", was, err)
	}
}

// helperAgent runs TestHelperAgent as an agent in a process of its own
// on o's namespace (policy "paper": the paper policy at 60 %) and returns
// once it is ready. When the test ends the process is killed and what it
// left is undone, so that a test failing halfway leaves nothing for the
// next one to find.
func helperAgent(t *testing.T, o Options, policy string) *exec.Cmd {
	t.Helper()
	env := "FALCON_TEST_AGENT=" + o.Netns + "," + o.StateRoot + "," + o.PinRoot
	if policy != "" {
		env += "," + policy
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgent$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if _, err := Disable(o); err != nil {
			t.Errorf("disable after the test: %v", err)
		}
	})
	// A hang guard, not a speed test: in the 6.1 guest under emulation a
	// helper took 18 s to attach its first hook and over 30 s to be ready.
	deadline := time.Now().Add(2 * time.Minute)
	for r, err := Status(o); err != nil || !r.Ready; r, err = Status(o) {
		if time.Now().After(deadline) {
			t.Fatalf("helper agent never became ready: %+v %v", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd
}

// TestHelperAgent is the agent helperAgent runs.
func TestHelperAgent(t *testing.T) {
	env := os.Getenv("FALCON_TEST_AGENT")
	if env == "" {
		t.Skip("helper process of TestKilledAgent")
	}
	f := strings.Split(env, ",")
	o := DefaultOptions()
	o.Netns, o.StateRoot, o.PinRoot = f[0], f[1], f[2]
	if len(f) > 3 && f[3] == "paper" {
		o.CPUs, o.Threshold, o.Policy = []int{0, 1}, 60, datapath.PolicyPaper
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDisableStopsAgent: Disable signals a live agent in another process,
// which undoes its own changes.
func TestDisableStopsAgent(t *testing.T) {
	needRoot(t)
	tb := bed(t, "flannel", 1)
	h := tb.Hosts[1]
	o := testOptions(t, h.Netns)
	cmd := helperAgent(t, o, "")
	if was, err := Disable(o); err != nil || !was {
		t.Fatalf("Disable: %v %v", was, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exited with %v", err)
	}
	noTrace(t, tb, o)
}

// TestDockerSandbox runs the agent on dockerd's real layout: vxlan0, br0
// and the host-side veths live in a sandbox namespace, the NIC in the host.
func TestDockerSandbox(t *testing.T) {
	needRoot(t)
	p := fmt.Sprintf("fct%dsb", os.Getpid())
	t.Cleanup(func() {
		for _, n := range []string{"h", "r", "ov", "c"} {
			exec.Command("ip", "netns", "del", p+"-"+n).Run()
		}
	})
	script := strings.NewReplacer("{p}", p).Replace(`
for n in h r ov c; do ip netns add {p}-$n; done
ip link add nic0 netns {p}-h type veth peer name nic0 netns {p}-r
ip -n {p}-h addr add 192.168.78.1/24 dev nic0; ip -n {p}-h link set nic0 up
ip -n {p}-r addr add 192.168.78.2/24 dev nic0; ip -n {p}-r link set nic0 up
ip -n {p}-h link add vxlan0 type vxlan id 4097 dstport 4789 remote 192.168.78.2
ip -n {p}-h link set vxlan0 netns {p}-ov
ip -n {p}-ov link add br0 type bridge; ip -n {p}-ov link set vxlan0 master br0 up; ip -n {p}-ov link set br0 up
ip -n {p}-ov link add veth0 type veth peer name eth0 netns {p}-c
ip -n {p}-ov link set veth0 master br0 up; ip -n {p}-c link set eth0 up`)
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	o := testOptions(t, p+"-h")
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	mask := cpuset.Mask(a.Host().Opts.CPUs)
	if got := read(t, p+"-ov", "/sys/class/net/vxlan0/queues/rx-0/rps_cpus"); got != mask {
		t.Errorf("sandbox vxlan0 rps_cpus %s, want %s", got, mask)
	}
	if got := read(t, p+"-c", "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != mask {
		t.Errorf("container eth0 rps_cpus %s, want %s", got, mask)
	}
	if out := attached(t, p+"-h"); !strings.Contains(out, "nic0 tcx") && !strings.Contains(out, "nic0 clsact") {
		t.Errorf("no hook on the host's NIC:\n%s", out)
	}
	if out := attached(t, p+"-ov"); !strings.Contains(out, "vxlan0 tcx") && !strings.Contains(out, "vxlan0 clsact") {
		t.Errorf("no hook on the sandbox's vxlan0:\n%s", out)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{p + "-h", p + "-ov"} {
		if out := attached(t, ns); strings.Contains(out, "falcon") {
			t.Errorf("left attached in %s:\n%s", ns, out)
		}
	}
	if got := read(t, p+"-c", "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != "0" {
		t.Errorf("container eth0 rps_cpus %s after stop, want 0", got)
	}
}

// TestHostVanished: the host namespace disappears under a running agent
// (a testbed taken down); stopping must still succeed and leave nothing.
func TestHostVanished(t *testing.T) {
	needRoot(t)
	tb := bed(t, "flannel", 1)
	o := testOptions(t, tb.Hosts[1].Netns)
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if err := testbed.Down(tb.Name); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("Stop after the namespace vanished: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(o.pinRoot(), "*", "falcon_*")); len(m) > 0 {
		t.Errorf("pins left: %v", m)
	}
	if _, err := os.Stat(o.stateRoot()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state left: %v", err)
	}
}
