package benchprobe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/kernel"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/toolpath"
	"github.com/falconnet/falcon/lab/xdpsend"
)

// MachineProber probes this machine. Device probes run in a scratch network
// namespace of its own (falcon-probe-<pid>), which Close removes with
// everything in it; nothing outside it is changed.
type MachineProber struct {
	ns      string
	created bool
}

// NewMachineProber returns a prober of this machine; Close it.
func NewMachineProber() *MachineProber {
	return &MachineProber{ns: fmt.Sprintf("falcon-probe-%d", os.Getpid())}
}

// Close removes the scratch namespace, if one was made.
func (m *MachineProber) Close() error {
	if !m.created {
		return nil
	}
	m.created = false
	if out, err := exec.Command("ip", "netns", "del", m.ns).CombinedOutput(); err != nil {
		return fmt.Errorf("remove probe namespace %s: %v: %s", m.ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (m *MachineProber) Kernel() string {
	k, err := kernel.Running()
	if err != nil {
		return "unknown"
	}
	return k.String()
}

func (m *MachineProber) CPUs() int {
	c, err := cpuset.Online()
	if err != nil {
		return 0
	}
	return len(c)
}

func (m *MachineProber) ToolsDir() string { return toolpath.Dir() }

// Scratch devices: a veth pair, a VXLAN device and a bridge.
const (
	probeVeth, probePeer = "fprobe0", "fprobe1"
	probeVXLAN           = "fprobevx0"
	probeBridge          = "fprobebr0"
)

func (m *MachineProber) Probe(id string) (string, error) {
	switch {
	case id == FeatRoot:
		if os.Geteuid() != 0 {
			return "", errors.New("run as root: testbeds are network namespaces, and falcon loads BPF")
		}
		return "", nil
	case id == FeatKernel:
		k, err := kernel.Running()
		if err != nil {
			return "", err
		}
		return checkRealKernel(k)
	case id == FeatNetns:
		return m.netns()
	case id == FeatVeth:
		return "", m.ip("link add "+probeVeth+" type veth peer name "+probePeer,
			"link set "+probeVeth+" up", "link set "+probePeer+" up")
	case id == FeatVXLAN:
		return "", m.ip("link add "+probeVXLAN+" type vxlan id 42 dstport 4789 local 10.255.0.1", "link set "+probeVXLAN+" up")
	case id == FeatBridge:
		return "", m.ip("link add "+probeBridge+" type bridge", "link set "+probeBridge+" up")
	case id == FeatBPFSyscall:
		return "", bpfSyscall()
	case id == FeatBPFLoad:
		return "", datapath.Supported()
	case id == FeatTC:
		return m.tcAttach()
	case id == FeatXDP:
		return m.xdp()
	case id == FeatThreadedNAPI:
		return m.threadedNAPI()
	case id == FeatKernelSender:
		return "", xdpsend.Probe(m.ns, probeVeth, probePeer)
	case id == FeatTracefs:
		if !kernel.TracefsMounted() {
			return "", errors.New("not mounted (mount -t tracefs nodev /sys/kernel/tracing)")
		}
		return "", nil
	case strings.HasPrefix(id, FeatTool):
		return probeTool(strings.TrimPrefix(id, FeatTool))
	}
	return "", fmt.Errorf("unknown probe %q", id)
}

// checkRealKernel refuses releases older than anything falcon supports.
// gVisor, the usual emulated kernel of sandboxes, reports 4.4.0 and has
// neither BPF nor VXLAN; a real 4.4 kernel lacks what falcon needs as well.
func checkRealKernel(k kernel.Release) (string, error) {
	if !k.AtLeast(4, 18) {
		hint := ""
		if k.Major == 4 && k.Minor == 4 {
			hint = "; gVisor reports 4.4.0: this looks like an emulated kernel (a sandbox), which has no BPF or VXLAN. " +
				"Run on a VM or on bare metal"
		}
		return "", fmt.Errorf("kernel %s is older than 4.18, the oldest falcon runs on%s", k, hint)
	}
	return "", nil
}

// bpfSyscall asks bpf() for a command no kernel has: a kernel with the
// syscall says EINVAL, one without it (CONFIG_BPF_SYSCALL off, gVisor)
// ENOSYS, and one that forbids it (not root, lockdown, a seccomp filter)
// EPERM.
func bpfSyscall() error {
	_, _, errno := unix.Syscall(unix.SYS_BPF, 0xffff, 0, 0)
	switch errno {
	case unix.EINVAL, 0:
		return nil
	case unix.ENOSYS:
		return errors.New("no bpf() syscall (ENOSYS): the kernel was built without CONFIG_BPF_SYSCALL, or it is emulated (gVisor)")
	case unix.EPERM, unix.EACCES:
		return fmt.Errorf("bpf() is not allowed here (%v): root, or a seccomp filter or kernel lockdown forbids it", errno)
	}
	return fmt.Errorf("bpf(): %v", errno)
}

func (m *MachineProber) netns() (string, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return "", errors.New("ip not found (apt-get install iproute2)")
	}
	if netns.Exists(m.ns) {
		// Left by a probe of the same pid that was killed: ours now.
		m.created = true
		return "", nil
	}
	if out, err := exec.Command("ip", "netns", "add", m.ns).CombinedOutput(); err != nil {
		return "", fmt.Errorf("ip netns add: %v: %s", err, strings.TrimSpace(string(out)))
	}
	m.created = true
	return "", nil
}

// ip runs "ip -n NS <cmd>" for each command.
func (m *MachineProber) ip(cmds ...string) error {
	for _, c := range cmds {
		out, err := exec.Command("ip", append([]string{"-n", m.ns}, strings.Fields(c)...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %s", c, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func trivialProgram(t ebpf.ProgramType) (*ebpf.Program, error) {
	ret := int32(0) // TC_ACT_OK
	if t == ebpf.XDP {
		ret = 2 // XDP_PASS
	}
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: t, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()},
	})
}

// tcAttach attaches a program that passes everything to the scratch veth,
// with tcx where the kernel has it and a clsact qdisc otherwise, as the
// datapath does.
func (m *MachineProber) tcAttach() (string, error) {
	prog, err := trivialProgram(ebpf.SchedCLS)
	if err != nil {
		return "", err
	}
	defer prog.Close()
	var how string
	err = netns.Do(m.ns, func() error {
		l, err := netlink.LinkByName(probePeer)
		if err != nil {
			return err
		}
		idx := l.Attrs().Index
		if tl, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: prog, Attach: ebpf.AttachTCXIngress}); err == nil {
			how = "tcx"
			return tl.Close()
		}
		q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0),
			Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
		if err := netlink.QdiscAdd(q); err != nil {
			return fmt.Errorf("no tcx, and no clsact qdisc: %w", err)
		}
		f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL}, Fd: prog.FD(), Name: "probe", DirectAction: true}
		if err := netlink.FilterAdd(f); err != nil {
			return fmt.Errorf("no tcx, and no cls_bpf filter on clsact: %w", err)
		}
		how = "clsact (no tcx: Linux 6.6 has it)"
		return nil // the namespace takes the qdisc with it
	})
	return how, err
}

// xdp attaches an XDP program natively (driver mode, as the split does)
// to the scratch veth and checks cpumap support.
func (m *MachineProber) xdp() (string, error) {
	if err := datapath.SplitSupported(); err != nil {
		return "", err
	}
	prog, err := trivialProgram(ebpf.XDP)
	if err != nil {
		return "", err
	}
	defer prog.Close()
	return "", netns.Do(m.ns, func() error {
		l, err := netlink.LinkByName(probePeer)
		if err != nil {
			return err
		}
		xl, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: l.Attrs().Index, Flags: link.XDPDriverMode})
		if err != nil {
			return fmt.Errorf("native XDP on a veth: %w", err)
		}
		return xl.Close()
	})
}

// threadedNAPI does what --nic-cpu does to the testbed's NIC: GRO on (veth
// polls with NAPI only then), threaded NAPI on, and a napi/<dev>-<id>
// kernel thread appears.
func (m *MachineProber) threadedNAPI() (string, error) {
	ethtool, err := toolpath.Lookup("ethtool")
	if err != nil {
		return "", fmt.Errorf("ethtool: %w", err)
	}
	if out, err := exec.Command("ip", "netns", "exec", m.ns, ethtool, "-K", probePeer, "gro", "on").CombinedOutput(); err != nil {
		return "", fmt.Errorf("ethtool -K %s gro on: %v: %s", probePeer, err, strings.TrimSpace(string(out)))
	}
	err = netns.WithSysfs(m.ns, func(root string) error {
		p := filepath.Join(root, "class/net", probePeer, "threaded")
		if err := os.WriteFile(p, []byte("1"), 0); err != nil {
			return fmt.Errorf("write %s: %w (threaded NAPI needs Linux 5.12)", strings.TrimPrefix(p, root), err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	prefix := "napi/" + probePeer + "-"
	for deadline := time.Now().Add(time.Second); ; {
		if hasThread(prefix) {
			return "", nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("threaded NAPI is on but no %s* kernel thread appeared", prefix)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasThread(prefix string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.HasPrefix(string(b), prefix) {
			return true
		}
	}
	return false
}

// probeTool finds a tool as the bench will (the bundle's copy first) and
// starts it, so that a bundled tool whose loader cannot run here is found
// now rather than in the first run.
func probeTool(name string) (string, error) {
	p, err := toolpath.Lookup(name)
	if err != nil {
		return "", err
	}
	from := "PATH"
	if filepath.IsAbs(p) {
		from = "bundle"
	}
	arg := "--version"
	if name == "ip" || name == "bridge" {
		arg = "-V"
	}
	out, err := exec.Command(p, arg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s (from %s) fails: %v: %s", p, arg, from, err, firstLine(out))
	}
	return from + ": " + firstLine(out), nil
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(l)
}
