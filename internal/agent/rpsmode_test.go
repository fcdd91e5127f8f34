package agent

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// The tests below check the rps and rfs modes against the Kubernetes
// RPS/RFS study's own description, computed here from the testbed's plan
// (device names), not from falcon's discovery: RPS and RPS+ write the mask
// of all CPUs to rps_cpus, RFS and RFS+ write 32768 to
// rps_sock_flow_entries and to rps_flow_cnt of each (single-queue) device,
// on the NIC, the VXLAN device and the host-side veths of the server host,
// and "+" also on the containers' eth0.

func needRootRPS(t *testing.T) {
	t.Helper()
	labtest.NeedTestbeds(t)
	if _, err := os.Stat(SockFlowPath); err != nil {
		t.Skipf("not in the initial network namespace (%v)", err)
	}
}

// rpsBed builds a testbed named after the pid and tag, removed when the
// test ends, also on failure.
func rpsBed(t *testing.T, tag, layout string, containers int) *testbed.Testbed {
	t.Helper()
	return labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("r%d%s", os.Getpid(), tag), Layout: layout, Containers: containers})
}

// rxValues reads rps_cpus and rps_flow_cnt of every receive queue of every
// device in every namespace of the testbed, keyed "netns dev rx-N attr",
// and the global rps_sock_flow_entries, keyed "global"; extra namespaces
// too.
func rxValues(t *testing.T, tb *testbed.Testbed, extra ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range append(tb.Namespaces(), extra...) {
		err := netns.WithSysfs(ns, func(root string) error {
			ps, err := filepath.Glob(filepath.Join(root, "class/net/*/queues/rx-*/rps_*"))
			if err != nil {
				return err
			}
			for _, p := range ps {
				attr := filepath.Base(p)
				if attr != "rps_cpus" && attr != "rps_flow_cnt" {
					continue
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				q := filepath.Dir(p)
				dev := filepath.Base(filepath.Dir(filepath.Dir(q)))
				out[fmt.Sprintf("%s %s %s %s", ns, dev, filepath.Base(q), attr)] = strings.TrimSpace(string(b))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(SockFlowPath)
	if err != nil {
		t.Fatal(err)
	}
	out["global"] = strings.TrimSpace(string(b))
	return out
}

// normMask makes masks comparable however the kernel pads them ("3",
// "00000000,00000003").
func normMask(s string) string {
	s = strings.TrimLeft(strings.ReplaceAll(s, ",", ""), "0")
	if s == "" {
		return "0"
	}
	return s
}

// allCPUsMask is the study's "f": every online CPU, computed without
// falcon's CPUMask.
func allCPUsMask(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	var m big.Int
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, _ := strings.Cut(part, "-")
		var a, z int
		fmt.Sscan(lo, &a)
		z = a
		if hi != "" {
			fmt.Sscan(hi, &z)
		}
		for c := a; c <= z; c++ {
			m.SetBit(&m, c, 1)
		}
	}
	return m.Text(16)
}

type studyMode struct {
	label string // the study's name
	mode  string
	plus  bool
}

var studyModes = []studyMode{{"RPS", ModeRPS, false}, {"RPS+", ModeRPS, true}, {"RFS", ModeRFS, false}, {"RFS+", ModeRFS, true}}

// studyExpect is what the study's configuration m makes of the values
// before on host hi of tb (1: h2, the server host).
func studyExpect(t *testing.T, tb *testbed.Testbed, m studyMode, before map[string]string, hi int) map[string]string {
	t.Helper()
	h := tb.Hosts[hi]
	type dev struct{ ns, name string }
	devs := []dev{{h.Netns, h.NIC}, {h.Netns, h.Overlay}}
	for _, c := range h.Containers {
		devs = append(devs, dev{h.Netns, c.HostVeth})
		if m.plus {
			devs = append(devs, dev{c.Netns, c.Dev})
		}
	}
	want := map[string]string{}
	for k, v := range before {
		want[k] = v
	}
	mask := allCPUsMask(t)
	for _, d := range devs {
		queues := 0
		for k := range before {
			if strings.HasPrefix(k, d.ns+" "+d.name+" ") && strings.HasSuffix(k, " rps_cpus") {
				queues++
			}
		}
		if queues != 1 {
			t.Fatalf("%s in %s has %d receive queues; the study's devices have one", d.name, d.ns, queues)
		}
		for k := range before {
			if !strings.HasPrefix(k, d.ns+" "+d.name+" ") {
				continue
			}
			switch {
			case m.mode == ModeRPS && strings.HasSuffix(k, " rps_cpus"):
				want[k] = mask
			case m.mode == ModeRFS && strings.HasSuffix(k, " rps_flow_cnt"):
				want[k] = "32768" // = rps_sock_flow_entries on a single-queue device
			}
		}
	}
	if m.mode == ModeRFS {
		want["global"] = "32768"
	}
	return want
}

// sameRx fails on every value of got that differs from want.
func sameRx(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, g := want[k], got[k]
		if strings.HasSuffix(k, "rps_cpus") {
			w, g = normMask(w), normMask(g)
		}
		if w != g {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], want[k])
		}
	}
	if len(want) < 8 {
		t.Errorf("%s: only %d values compared, which proves nothing", what, len(want))
	}
}

// plant sets values that are not the kernel's defaults, so that a restore
// to the defaults instead of to what was there is caught.
func plant(t *testing.T, tb *testbed.Testbed) {
	t.Helper()
	h := tb.Hosts[1]
	write(t, h.Netns, "/sys/class/net/"+h.NIC+"/queues/rx-0/rps_cpus", "1")
	write(t, h.Containers[0].Netns, "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "32")
}

func rpsOptions(t *testing.T, ns string, m studyMode) Options {
	o := testOptions(t, ns)
	o.Mode, o.ContainerLevel = m.mode, m.plus
	return o
}

// TestStudyModes enables each of the study's four configurations on the
// flannel and calico layouts, with an agent (Start, as 'falcon agent' and
// the DaemonSet run it) and without one (Apply, as 'falcon enable' does),
// reads every value back host and container side, and checks that
// stopping or disabling restores every value.
func TestStudyModes(t *testing.T) {
	needRootRPS(t)
	for _, layout := range []string{"flannel", "calico"} {
		t.Run(layout, func(t *testing.T) {
			tb := rpsBed(t, layout[:3], layout, 2)
			plant(t, tb)
			before := rxValues(t, tb)
			for _, m := range studyModes {
				want := studyExpect(t, tb, m, before, 1)
				t.Run(m.label+"/agent", func(t *testing.T) {
					o := rpsOptions(t, tb.Hosts[1].Netns, m)
					a, err := Start(context.Background(), o)
					if err != nil {
						t.Fatal(err)
					}
					sameRx(t, "enabled", want, rxValues(t, tb))
					r, err := Status(o)
					if err != nil {
						t.Fatal(err)
					}
					if !r.Ready || !r.Running || r.Static || r.Mode != m.mode || len(r.Values) == 0 || r.Problem != "" {
						t.Errorf("status: %+v", r)
					}
					if err := a.Stop(); err != nil {
						t.Fatal(err)
					}
					sameRx(t, "stopped", before, rxValues(t, tb))
					noState(t, o)
				})
				t.Run(m.label+"/apply", func(t *testing.T) {
					o := rpsOptions(t, tb.Hosts[1].Netns, m)
					st, err := Apply(o)
					if err != nil {
						t.Fatal(err)
					}
					sameRx(t, "applied", want, rxValues(t, tb))
					checkValues(t, st.Values, rxValues(t, tb))
					r, err := Status(o)
					if err != nil {
						t.Fatal(err)
					}
					if !r.Ready || r.Running || !r.Static || r.Pid != 0 || r.Mode != m.mode || r.Problem != "" {
						t.Errorf("status: %+v", r)
					}
					if was, err := Disable(o); err != nil || !was {
						t.Fatalf("disable: %v, %v", was, err)
					}
					sameRx(t, "disabled", before, rxValues(t, tb))
					noState(t, o)
				})
			}
		})
	}
}

// checkValues: what status lists as set is what is there.
func checkValues(t *testing.T, vs []Value, now map[string]string) {
	t.Helper()
	if len(vs) == 0 {
		t.Fatal("no values reported")
	}
	for _, v := range vs {
		k := "global"
		if v.Device != "" {
			q := filepath.Base(filepath.Dir(v.Path))
			k = fmt.Sprintf("%s %s %s %s", v.Netns, v.Device, q, filepath.Base(v.Path))
		}
		got, ok := now[k]
		if !ok || normMask(got) != normMask(v.Value) {
			t.Errorf("status says %s = %s; it is %q", k, v.Value, got)
		}
	}
}

func noState(t *testing.T, o Options) {
	t.Helper()
	if ents, err := os.ReadDir(o.stateRoot()); err == nil && len(ents) > 0 {
		t.Errorf("state left in %s", o.stateRoot())
	}
}

// TestApplyAgain: applying the same settings again sets the containers that
// came since and keeps the values from before the first Apply, which
// disable restores, the new container's included.
func TestApplyAgain(t *testing.T) {
	needRootRPS(t)
	tb := rpsBed(t, "again", "flannel", 1)
	h := tb.Hosts[1]
	plant(t, tb)
	before := rxValues(t, tb)
	o := rpsOptions(t, h.Netns, studyMode{"RFS+", ModeRFS, true})
	o.RPSCPUs = []int{0}
	if _, err := Apply(o); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("fct%dagain", os.Getpid())
	veth := fmt.Sprintf("vethag%d", os.Getpid()%10000)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	script := fmt.Sprintf(`ip netns add %[1]s
ip -n %[2]s link add %[3]s type veth peer name eth0 netns %[1]s
ip -n %[1]s link set eth0 up
ip -n %[2]s link set %[3]s master %[4]s up`, ns, h.Netns, veth, h.Bridge)
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cpus, cnt := "/sys/class/net/eth0/queues/rx-0/rps_cpus", "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"
	if read(t, ns, cpus) != "0" || read(t, ns, cnt) != "0" {
		t.Fatal("the new container starts with RPS or RFS set")
	}
	st, err := Apply(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, ns, cpus); normMask(got) != "1" {
		t.Errorf("new container's rps_cpus = %s, want 1", got)
	}
	if got := read(t, ns, cnt); got != "32768" {
		t.Errorf("new container's rps_flow_cnt = %s, want 32768", got)
	}
	if got := read(t, h.Netns, "/sys/class/net/"+veth+"/queues/rx-0/rps_flow_cnt"); got != "32768" {
		t.Errorf("new host veth's rps_flow_cnt = %s, want 32768", got)
	}
	checkValues(t, st.Values, rxValues(t, tb, ns))
	if was, err := Disable(o); err != nil || !was {
		t.Fatalf("disable: %v, %v", was, err)
	}
	after := rxValues(t, tb)
	for _, attr := range []string{"rps_cpus", "rps_flow_cnt"} {
		k := fmt.Sprintf("%s %s rx-0 %s", h.Netns, veth, attr)
		if after[k] != "0" {
			t.Errorf("%s = %s after disable, want 0", k, after[k])
		}
		delete(after, k)
	}
	sameRx(t, "disabled", before, after)
	if read(t, ns, cpus) != "0" || read(t, ns, cnt) != "0" {
		t.Error("the new container's values were not restored")
	}
	noState(t, o)
}

// TestStudyModesBadInput: each mistake is refused with a clear message by
// Start and Apply alike, before anything changes.
func TestStudyModesBadInput(t *testing.T) {
	needRootRPS(t)
	tb := rpsBed(t, "bad", "calico", 1)
	h := tb.Hosts[1]
	before := rxValues(t, tb)
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"rps-cpus", func(o *Options) { o.Mode, o.RPSCPUs = ModeRPS, []int{0, 4095} }, "--rps-cpus: CPU 4095 does not exist"},
		{"rfs-cpus", func(o *Options) { o.Mode, o.RPSCPUs = ModeRFS, []int{4095} }, "--rps-cpus: CPU 4095 does not exist"},
		{"entries", func(o *Options) { o.Mode, o.FlowEntries = ModeRFS, 1000 }, "not a power of two"},
		{"entries-limit", func(o *Options) { o.Mode, o.FlowEntries = ModeRFS, 1<<30 }, "limit"},
		{"entries-rps", func(o *Options) { o.Mode, o.FlowEntries = ModeRPS, 4096 }, "use --mode rfs"},
		{"falcon-level", func(o *Options) { o.Mode, o.ContainerLevel = ModeFalcon, true }, "--container-level"},
		{"falcon-rps-cpus", func(o *Options) { o.Mode, o.RPSCPUs = ModeFalcon, []int{0} }, "--rps-cpus"},
		{"mode", func(o *Options) { o.Mode = "rps+" }, `mode "rps+": want one of`},
		{"no-overlay", func(o *Options) { o.Mode, o.Netns = ModeRPS, tb.Hosts[0].Containers[0].Netns }, "no VXLAN overlay found"},
		{"netns", func(o *Options) { o.Mode, o.Netns = ModeRFS, "fct-no-such-netns" }, "not found"},
	}
	for _, c := range cases {
		for _, how := range []string{"start", "apply"} {
			o := testOptions(t, h.Netns)
			c.mod(&o)
			var err error
			if how == "start" {
				var a *Agent
				if a, err = Start(context.Background(), o); err == nil {
					a.Stop()
				}
			} else {
				_, err = Apply(o)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: error %v, want it to say %q", how, c.name, err, c.want)
			}
			if _, err := os.Stat(o.stateRoot()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s %s: state directory created", how, c.name)
			}
		}
	}
	sameRx(t, "after bad input", before, rxValues(t, tb))
}

// TestSharedSockFlowTable: rps_sock_flow_entries is the kernel's, not a
// namespace's. Two agents with RFS (one per host of a testbed) share it:
// the first to stop leaves it to the other, the last restores it, and an
// agent asking for another size while it is held is refused.
func TestSharedSockFlowTable(t *testing.T) {
	needRootRPS(t)
	tb := rpsBed(t, "share", "calico", 1)
	before := rxValues(t, tb)
	rfs := studyMode{"RFS", ModeRFS, false}
	o1, o2 := rpsOptions(t, tb.Hosts[0].Netns, rfs), rpsOptions(t, tb.Hosts[1].Netns, rfs)
	a1, err := Start(context.Background(), o1)
	if err != nil {
		t.Fatal(err)
	}
	defer a1.Stop()
	bad := o2
	bad.FlowEntries = 4096
	if _, err := Apply(bad); err == nil || !strings.Contains(err.Error(), "is 32768 for another falcon agent") {
		t.Errorf("a second size: %v", err)
	}
	sameRx(t, "refused", studyExpect(t, tb, rfs, before, 0), rxValues(t, tb))
	if _, err := Apply(o2); err != nil {
		t.Fatal(err)
	}
	if err := a1.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := rxValues(t, tb)["global"]; got != "32768" {
		t.Errorf("rps_sock_flow_entries = %s while the second agent runs, want 32768", got)
	}
	if _, err := Disable(o2); err != nil {
		t.Fatal(err)
	}
	sameRx(t, "both stopped", before, rxValues(t, tb))
	noPath(t, globalFile)
	noPath(t, globalLock)
}

func noPath(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind (%v)", p, err)
	}
}
