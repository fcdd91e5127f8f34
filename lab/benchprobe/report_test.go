package benchprobe

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/kernel"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
)

// fakeProber is a machine made of answers: every feature works unless
// missing says why not.
type fakeProber struct {
	kernel  string
	cpus    int
	missing map[string]string
	probed  []string
}

func (f *fakeProber) Probe(id string) (string, error) {
	f.probed = append(f.probed, id)
	if why, ok := f.missing[id]; ok {
		return "", errors.New(why)
	}
	return "", nil
}
func (f *fakeProber) Kernel() string   { return f.kernel }
func (f *fakeProber) CPUs() int        { return f.cpus }
func (f *fakeProber) ToolsDir() string { return "/opt/falcon-bench/tools" }

var everything = BenchNeeds{VXLAN: true, Bridge: true, BPF: true, XDP: true, ThreadedNAPI: true, KernelSender: true,
	Tools: []string{"ip", "iperf3", "sockperf"}}

// TestProbeBenchGVisor: a gVisor sandbox (4.4.0, no bpf(), no VXLAN) is
// refused with a list naming each missing feature and why, the features
// that depend on a missing one as not tried, and nothing it has.
func TestProbeBenchGVisor(t *testing.T) {
	k, _ := kernel.ParseRelease("4.4.0")
	_, kerr := checkRealKernel(k)
	f := &fakeProber{kernel: "4.4.0", cpus: 16, missing: map[string]string{
		FeatKernel:     kerr.Error(),
		FeatVXLAN:      "ip link add fprobevx0 type vxlan …: RTNETLINK answers: Operation not supported",
		FeatBPFSyscall: "no bpf() syscall (ENOSYS)",
		FeatTracefs:    "not mounted",
	}}
	r := ProbeBench(f, everything)
	err := r.Err()
	if !errors.Is(err, ErrBenchRefused) {
		t.Fatalf("Err() = %v, want a refusal", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"missing:\n",
		"  - a real Linux kernel, 4.18 or newer: kernel 4.4.0 is older than 4.18",
		"gVisor reports 4.4.0",
		"  - VXLAN devices: ip link add",
		"  - the bpf() syscall: no bpf() syscall (ENOSYS)",
		"  - loading falcon's tc programs (SCHED_CLS, bpf_set_hash, its maps): not tried, it needs the bpf() syscall",
		"  - attaching tc programs (tcx, or clsact before Linux 6.6): not tried, it needs loading falcon's tc programs",
		"  - native XDP on a veth and a cpumap (falcon+split): not tried, it needs loading falcon's tc programs",
		"  - XDP live frames out of a veth (--sender kernel, Linux 5.18): not tried, it needs the bpf() syscall",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal lacks %q:\n%s", want, msg)
		}
	}
	// Failures come before what was not tried for their sake; what works
	// or is not needed (tracefs) is not listed.
	if strings.Index(msg, "VXLAN") > strings.Index(msg, "not tried") {
		t.Errorf("a failure listed after the untried ones:\n%s", msg)
	}
	for _, not := range []string{"tracefs", "veth pairs", "threaded", "iperf3", "CPUs"} {
		if strings.Contains(msg, not) {
			t.Errorf("refusal names %q, which is there or not needed:\n%s", not, msg)
		}
	}
	// Untried features were never probed.
	for _, id := range f.probed {
		if id == FeatBPFLoad || id == FeatTC || id == FeatXDP {
			t.Errorf("%s probed although bpf() is missing", id)
		}
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kernel 4.4.0, 16 online CPUs, tools from /opt/falcon-bench/tools first") ||
		!strings.Contains(out.String(), "7 feature(s) this run needs are missing") {
		t.Errorf("report's header or verdict:\n%s", out.String())
	}
	state := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 2 && strings.HasPrefix(l, "  ") {
			state[strings.Join(f[1:3], " ")] = f[0]
		}
	}
	for what, want := range map[string]string{"VXLAN devices": "MISSING", "attaching tc": "untried", "veth pairs": "ok",
		"tracefs (only": "(MISSING)", "threaded NAPI": "ok"} {
		if state[what] != want {
			t.Errorf("report: %q is %q, want %q:\n%s", what, state[what], want, out.String())
		}
	}
}

// TestProbeBenchNeeds: only what the run needs can refuse it; a machine
// without XDP runs a bench without split, and too few CPUs refuse any.
func TestProbeBenchNeeds(t *testing.T) {
	noXDP := map[string]string{FeatXDP: "native XDP on a veth: operation not supported", FeatThreadedNAPI: "no threaded"}
	r := ProbeBench(&fakeProber{kernel: "6.1.0", cpus: 2, missing: noXDP}, BenchNeeds{VXLAN: true, BPF: true, Tools: []string{"iperf3"}})
	if err := r.Err(); err != nil {
		t.Errorf("bench without split refused for XDP: %v", err)
	}
	r = ProbeBench(&fakeProber{kernel: "6.1.0", cpus: 2, missing: noXDP}, everything)
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "native XDP on a veth and a cpumap (falcon+split): native XDP") ||
		!strings.Contains(err.Error(), "threaded NAPI on a veth (--nic-cpu): no threaded") {
		t.Errorf("split and --nic-cpu on a machine without XDP and threaded NAPI: %v", err)
	}
	// A kernel older than 5.18 refuses --sender kernel, and only that.
	noLive := map[string]string{FeatKernelSender: "kernel sender on fprobe0: invalid argument"}
	if err := ProbeBench(&fakeProber{kernel: "5.15.0", cpus: 2, missing: noLive}, BenchNeeds{VXLAN: true, BPF: true}).Err(); err != nil {
		t.Errorf("bench with the tools' senders refused for live frames: %v", err)
	}
	if err := ProbeBench(&fakeProber{kernel: "5.15.0", cpus: 2, missing: noLive}, everything).Err(); err == nil ||
		!strings.Contains(err.Error(), "XDP live frames out of a veth (--sender kernel, Linux 5.18): kernel sender on fprobe0") {
		t.Errorf("--sender kernel on a kernel without live frames: %v", err)
	}
	n := everything
	n.CPUs = "--preset scale needs at least 8 online CPUs; this machine has 2"
	r = ProbeBench(&fakeProber{kernel: "6.18.0", cpus: 2}, n)
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "  - enough online CPUs: --preset scale needs at least 8") {
		t.Errorf("too few CPUs: %v", err)
	}
	// A missing tool, and a broken bundled one, are listed by name.
	r = ProbeBench(&fakeProber{kernel: "6.18.0", cpus: 2, missing: map[string]string{FeatTool + "sockperf": "sockperf not found"}},
		BenchNeeds{Tools: []string{"iperf3", "sockperf"}})
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "  - sockperf: sockperf not found") {
		t.Errorf("missing tool: %v", err)
	}
	// Not root: everything that needs it is untried, not failed.
	r = ProbeBench(&fakeProber{kernel: "6.18.0", cpus: 2, missing: map[string]string{FeatRoot: "run as root"}}, everything)
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "  - root: run as root") ||
		!strings.Contains(err.Error(), "network namespaces (ip netns add): not tried, it needs root") {
		t.Errorf("not root: %v", err)
	}
}

func TestCheckRealKernel(t *testing.T) {
	for rel, ok := range map[string]bool{"4.4.0": false, "4.17.3": false, "4.18.0": true, "6.1.0-26-amd64": true, "6.18.44-fc": true} {
		k, err := kernel.ParseRelease(rel)
		if err != nil {
			t.Fatal(err)
		}
		_, err = checkRealKernel(k)
		if (err == nil) != ok {
			t.Errorf("%s: %v", rel, err)
		}
		if rel == "4.4.0" && (err == nil || !strings.Contains(err.Error(), "emulated kernel")) {
			t.Errorf("4.4.0 not called emulated: %v", err)
		}
	}
}

// TestMachineProber: on this machine (root, a real kernel, set up by
// scripts/setup.sh) every device and BPF feature works, and the scratch
// namespace is gone afterwards.
func TestMachineProber(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	labtest.NeedRoot(t)
	p := NewMachineProber()
	r := ProbeBench(p, everything)
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	// Sandbox kernels may refuse XDP's metadata (the split) and its live
	// frames (the kernel sender); nothing else may be missing.
	for _, it := range r.Missing() {
		if it.ID != FeatXDP && it.ID != FeatKernelSender {
			t.Errorf("this machine refused %s: %s", it.What, it.Detail)
		}
	}
	if err := r.Err(); err != nil {
		t.Logf("this kernel refuses: %v", err)
	}
	if netns.Exists(p.ns) {
		t.Errorf("scratch namespace %s left behind", p.ns)
		exec.Command("ip", "netns", "del", p.ns).Run()
	}
	for _, it := range r.Items {
		if it.ID == FeatTC && it.Detail == "" {
			t.Errorf("tc attach does not say how it attached")
		}
	}
}
