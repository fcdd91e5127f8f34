package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
)

// TestMain doubles as a stand-in agent for TestCleanupAfterKilledAgent.
func TestMain(m *testing.M) {
	if spec := os.Getenv("FALCON_TEST_AGENT"); spec != "" {
		os.Exit(fakeAgent(spec))
	}
	os.Exit(m.Run())
}

// fakeAgent attaches as "netns,ifindex,pinDir,clsact[,split]" says, reports ready
// and waits to be killed.
func fakeAgent(spec string) int {
	f := strings.Split(spec, ",")
	idx, _ := strconv.Atoi(f[1])
	cfg := DefaultConfig()
	cfg.CPUs = []int{0}
	d, err := Load(cfg, f[2])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	d.forceClsact = f[3] == "clsact"
	if err := d.Attach(Hook{Netns: f[0], Ifindex: idx, Role: HookOnNIC, NextIfindex: 1}); err != nil {
		fmt.Println(err)
		return 1
	}
	if len(f) > 4 && f[4] == "split" {
		if err := d.AttachSplit(SplitHook{Netns: f[0], Ifindex: idx}); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 1
}

// testNetns makes a namespace with a veth pair fva/fvb, removed at the end.
func testNetns(t *testing.T) (ns string, a, b int) {
	t.Helper()
	labtest.NeedRoot(t)
	ns = fmt.Sprintf("fct%d%s", os.Getpid(), strings.ToLower(strings.NewReplacer("/", "", "Test", "").Replace(t.Name())))
	if len(ns) > 40 {
		ns = ns[:40]
	}
	ip(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ip(t, "-n", ns, "link", "add", "fva", "type", "veth", "peer", "name", "fvb")
	ip(t, "-n", ns, "link", "set", "fva", "up")
	ip(t, "-n", ns, "link", "set", "fvb", "up")
	return ns, ifindex(t, ns, "fva"), ifindex(t, ns, "fvb")
}

// loadOnCPU0 loads a datapath whose Falcon set is CPU 0, pinned at pin
// ("" = not pinned).
func loadOnCPU0(t *testing.T, pin string) *Datapath {
	t.Helper()
	cfg := DefaultConfig()
	cfg.CPUs = []int{0}
	d, err := Load(cfg, pin)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ip runs the ip command, failing the test if it fails.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

func testPinDir(t *testing.T) string {
	dir := filepath.Join(BPFFS, fmt.Sprintf("fct%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")))
	t.Cleanup(func() {
		Cleanup(dir, nil)
		os.RemoveAll(dir)
	})
	return dir
}

// attached counts what of ours is on a device: tcx programs named
// falcon_steer, cls_bpf filters named so, and whether a clsact qdisc exists.
type attached struct {
	tcx, filters int
	clsact       bool
}

func inspect(t *testing.T, ns string, ifindex int, egress bool) attached {
	t.Helper()
	var a attached
	err := netns.Do(ns, func() error {
		at := ebpf.AttachTCXIngress
		if egress {
			at = ebpf.AttachTCXEgress
		}
		var res *link.QueryResult
		if HaveTCX() == nil { // without tcx there is nothing to query (EINVAL)
			var err error
			if res, err = link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: at}); err != nil {
				return err
			}
		} else {
			res = &link.QueryResult{}
		}
		for _, p := range res.Programs {
			prog, err := ebpf.NewProgramFromID(p.ID)
			if err != nil {
				continue
			}
			if info, err := prog.Info(); err == nil && info.Name == progName {
				a.tcx++
			}
			prog.Close()
		}
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		qs, err := netlink.QdiscList(l)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Type() == "clsact" {
				a.clsact = true
			}
		}
		if a.clsact {
			fs, err := netlink.FilterList(l, filterParent(egress))
			if err != nil {
				return err
			}
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, progName) {
					a.filters++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func progIDs(t *testing.T, d *Datapath) []ebpf.ProgramID {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []ebpf.ProgramID
	for _, a := range d.hooks {
		info, err := a.prog.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		ids = append(ids, id)
	}
	return ids
}

// checkProgsGone waits for the programs to be freed: the kernel frees a
// cls_bpf filter's program after an RCU grace period, not at once.
func checkProgsGone(t *testing.T, ids []ebpf.ProgramID) {
	t.Helper()
	for _, id := range ids {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				break
			}
			p.Close()
			if time.Now().After(deadline) {
				t.Errorf("program %d still loaded", id)
				break
			}
		}
	}
}

// needTCX skips a test of the tcx path where falcon's own probe finds no
// tcx (before Linux 6.6); the clsact path has tests of its own.
func needTCX(t *testing.T) {
	t.Helper()
	if err := HaveTCX(); err != nil {
		t.Skipf("no tcx on this kernel (falcon's probe: %v): tc programs attach through clsact here", err)
	}
}

// guest: shows the tcx probe refusing on 6.1 (a skip there) as much as attaching on a newer kernel
func TestAttachDetachTCX(t *testing.T) {
	needTCX(t)
	ns, a, b := testNetns(t)
	pin := testPinDir(t)
	d := loadOnCPU0(t, pin)
	ha := Hook{Netns: ns, Ifindex: a, Name: "fva", Role: HookOnNIC, NextIfindex: b}
	hb := Hook{Netns: ns, Ifindex: b, Name: "fvb", Role: HookOnOverlay, NextIfindex: 99, Egress: true}
	for _, h := range []Hook{ha, hb} {
		if err := d.Attach(h); err != nil {
			t.Fatal(err)
		}
	}
	ha.NextIfindex = 77
	if err := d.Attach(ha); err != nil { // again: updates, attaches nothing more
		t.Fatal(err)
	}
	if got := inspect(t, ns, a, false); got != (attached{tcx: 1}) {
		t.Errorf("fva ingress: %+v, want one tcx program", got)
	}
	if got := inspect(t, ns, b, true); got != (attached{tcx: 1}) {
		t.Errorf("fvb egress: %+v, want one tcx program", got)
	}
	ids := progIDs(t, d)

	c, err := ReadCounters(pin)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Stages) != 2 {
		t.Fatalf("pinned counters show %d stages, want 2", len(c.Stages))
	}
	for _, s := range c.Stages {
		want := ha
		if s.Hook.Name == "fvb" {
			want = hb
		}
		if s.Hook != want {
			t.Errorf("stage hook %+v, want %+v", s.Hook, want)
		}
	}
	if got, _, _, _, err := ReadState(pin); err != nil || got.Threshold != 85 || len(got.CPUs) != 1 {
		t.Errorf("ReadState: %+v, %v", got, err)
	}

	if err := d.Detach(ha); err != nil {
		t.Fatal(err)
	}
	if got := inspect(t, ns, a, false); got != (attached{}) {
		t.Errorf("fva after Detach: %+v, want nothing", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := inspect(t, ns, b, true); got != (attached{}) {
		t.Errorf("fvb after Close: %+v, want nothing", got)
	}
	if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory left after Close: %v", err)
	}
	checkProgsGone(t, ids)
}

// guest: clsact is how tc programs attach on 6.1, which has no tcx
func TestAttachDetachClsact(t *testing.T) {
	ns, a, b := testNetns(t)
	// fvb has a clsact qdisc of someone else's: it must stay.
	if out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "fvb", "clsact").CombinedOutput(); err != nil {
		t.Fatalf("tc: %v: %s", err, out)
	}
	d := loadOnCPU0(t, "")
	d.forceClsact = true
	ha := Hook{Netns: ns, Ifindex: a, Name: "fva", Role: HookOnNIC, NextIfindex: b}
	hb := Hook{Netns: ns, Ifindex: b, Name: "fvb", Role: HookOnOverlay, NextIfindex: 9}
	for _, h := range []Hook{ha, hb} {
		if err := d.Attach(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []int{a, b} {
		if got := inspect(t, ns, x, false); got != (attached{filters: 1, clsact: true}) {
			t.Errorf("ifindex %d: %+v, want clsact with our filter", x, got)
		}
	}
	ids := progIDs(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := inspect(t, ns, a, false); got != (attached{}) {
		t.Errorf("fva after Close: %+v, want nothing (the qdisc was ours)", got)
	}
	if got := inspect(t, ns, b, false); got != (attached{clsact: true}) {
		t.Errorf("fvb after Close: %+v, want the pre-existing clsact without our filter", got)
	}
	checkProgsGone(t, ids)
}

// guest: pins across a kill, and their cleanup, on the old kernel's attach path
func TestCleanupAfterKilledAgent(t *testing.T) {
	for _, mode := range []string{"tcx", "clsact"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "tcx" {
				needTCX(t)
			}
			ns, a, _ := testNetns(t)
			pin := testPinDir(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("FALCON_TEST_AGENT=%s,%d,%s,%s", ns, a, pin, mode))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if strings.TrimSpace(line) != "ready" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("agent: %q", line)
			}
			cmd.Process.Kill()
			cmd.Wait()

			got := inspect(t, ns, a, false)
			want := attached{tcx: 1} // pinned: it outlives its process
			if mode == "clsact" {
				want = attached{filters: 1, clsact: true} // a filter holds its program
			}
			if got != want {
				t.Errorf("after kill: %+v, want %+v", got, want)
			}
			if pins, _ := filepath.Glob(filepath.Join(pin, "falcon_*")); len(pins) == 0 {
				t.Error("after kill: no pins left to clean up")
			}
			cfg := DefaultConfig()
			cfg.CPUs = []int{0}
			if _, err := Load(cfg, pin); err == nil || !strings.Contains(err.Error(), "already pinned") {
				t.Errorf("Load over a killed agent's pins: %v, want an 'already pinned' error", err)
			}

			if err := Cleanup(pin, []Hook{{Netns: ns, Ifindex: a, Name: "fva", Role: HookOnNIC}}); err != nil {
				t.Fatal(err)
			}
			if got := inspect(t, ns, a, false); got != (attached{}) {
				t.Errorf("after Cleanup: %+v, want nothing", got)
			}
			if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pin directory left after Cleanup: %v", err)
			}
		})
	}
}

// guest: detaching from a namespace already gone, on the old kernel's attach path
func TestCloseAfterNamespaceGone(t *testing.T) {
	for _, mode := range []string{"tcx", "clsact"} {
		t.Run(mode, func(t *testing.T) {
			ns, a, _ := testNetns(t)
			d := loadOnCPU0(t, "")
			d.forceClsact = mode == "clsact"
			if err := d.Attach(Hook{Netns: ns, Ifindex: a, Name: "fva", Role: HookOnNIC}); err != nil {
				t.Fatal(err)
			}
			ids := progIDs(t, d)
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Fatalf("ip netns del: %v: %s", err, out)
			}
			if err := d.Close(); err != nil {
				t.Errorf("Close after the namespace went away: %v", err)
			}
			checkProgsGone(t, ids)
		})
	}
}

// guest: the tcx link's cleanup, or the probe's refusal on 6.1
func TestCleanupDetachesLiveTCXLink(t *testing.T) {
	needTCX(t)
	ns, a, _ := testNetns(t)
	d := loadOnCPU0(t, "")
	defer d.Close()
	h := Hook{Netns: ns, Ifindex: a, Name: "fva", Role: HookOnNIC}
	if err := d.Attach(h); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup("", []Hook{h}); err != nil {
		t.Fatal(err)
	}
	if got := inspect(t, ns, a, false); got != (attached{}) {
		t.Errorf("after Cleanup of a hung agent's link: %+v, want nothing", got)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close after Cleanup: %v", err)
	}
}

// guest: bad attaches must leave nothing behind on the old kernel's attach path too
func TestAttachBadInputChangesNothing(t *testing.T) {
	ns, a, _ := testNetns(t)
	d := loadOnCPU0(t, "")
	defer d.Close()
	for name, h := range map[string]Hook{
		"unknown netns": {Netns: "fct-no-such-netns", Ifindex: a, Role: HookOnNIC},
		"bad role":      {Netns: ns, Ifindex: a, Role: "bridge"},
		"no ifindex":    {Netns: ns, Role: HookOnNIC},
		"gone ifindex":  {Netns: ns, Ifindex: 9999, Role: HookOnNIC},
		"name mismatch": {Netns: ns, Ifindex: a, Name: "fvb", Role: HookOnNIC},
	} {
		if err := d.Attach(h); err == nil {
			t.Errorf("%s: Attach succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if got := inspect(t, ns, a, false); got != (attached{}) {
		t.Errorf("after failed attaches: %+v, want nothing", got)
	}
	if len(d.hooks) != 0 || d.ids[0] {
		t.Errorf("failed attaches left hook state: %d hooks", len(d.hooks))
	}
}

// guest: the config checks beside the attach tests, as the guest has always run them
func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.CPUs = []int{3, 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no cpus":        func(c *Config) { c.CPUs = nil },
		"negative cpu":   func(c *Config) { c.CPUs = []int{-1} },
		"huge cpu":       func(c *Config) { c.CPUs = []int{MaxCPUs} },
		"duplicate cpu":  func(c *Config) { c.CPUs = []int{1, 1} },
		"threshold 101":  func(c *Config) { c.Threshold = 101 },
		"threshold -1":   func(c *Config) { c.Threshold = -1 },
		"negative gap":   func(c *Config) { c.Recheck = -1 },
		"bad policy":     func(c *Config) { c.Policy = "greedy" },
		"no timeout":     func(c *Config) { c.GuardTimeout = 0 },
		"bad fallback":   func(c *Config) { c.Fallback = "drop" },
		"port 0":         func(c *Config) { c.VXLANPorts = []uint16{0} },
		"too many ports": func(c *Config) { c.VXLANPorts = make([]uint16, MaxPorts+1) },
		"negative stale": func(c *Config) { c.StaleAfter = -time.Second },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
		if _, err := Load(c, ""); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
	if _, err := Load(good, "relative/pins"); err == nil {
		t.Error("Load with a relative pin directory succeeded")
	}
	if _, err := Load(good, "/tmp/falcon-not-bpffs"); err == nil {
		t.Error("Load with a pin directory outside bpffs succeeded")
	}
}

// guest: the probe that says whether falcon runs at all, on the oldest kernel it supports
func TestSupported(t *testing.T) {
	labtest.NeedRoot(t)
	if err := Supported(); err != nil {
		t.Fatal(err)
	}
}
