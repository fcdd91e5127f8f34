package doctor

import (
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/kernel"
)

// checkKernel: what falcon's datapath needs from the kernel. Only a kernel
// without BPF is an error; everything else narrows what falcon can do
// (info), it is nothing to repair.
func checkKernel(st *state, k kernel.Release) []Finding {
	var fs []Finding
	add := func(check string, sev Severity, msg string) {
		fs = append(fs, Finding{Check: check, Severity: sev, Message: msg})
	}
	// The datapath's own probe, so that doctor and 'falcon enable' agree.
	if err := datapath.Supported(); err != nil {
		add(CheckBPF, Error, err.Error())
	} else {
		add(CheckBPF, OK, "the tc datapath's programs, helpers and maps are available")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		add(CheckBTF, Info, "no kernel BTF (/sys/kernel/btf/vmlinux): tracepoint-based stage tracing is unavailable")
	} else {
		add(CheckBTF, OK, "kernel BTF present")
	}
	if err := datapath.HaveTCX(); err != nil {
		add(CheckTCX, Info, fmt.Sprintf("no tcx (kernel %s; needs 6.6): tc programs attach through a clsact qdisc instead (%v)", k, err))
	} else {
		add(CheckTCX, OK, "tcx available")
	}
	xdpErr := features.HaveProgramType(ebpf.XDP)
	gro, groErr := datapath.CPUMapGRO() // the kernel's BTF knows backports
	if groErr != nil {
		gro = k.AtLeast(6, 15)
	}
	switch err := features.HaveMapType(ebpf.CPUMap); {
	case xdpErr != nil:
		add(CheckCPUMapGRO, Info, fmt.Sprintf("no XDP programs (%v): the NIC stage cannot be split", xdpErr))
	case err != nil:
		add(CheckCPUMapGRO, Info, fmt.Sprintf("no cpumap (%v): the NIC stage cannot be split", err))
	case !gro:
		add(CheckCPUMapGRO, Info, fmt.Sprintf("cpumap without GRO (kernel %s; GRO in cpumap needs 6.15): splitting the NIC "+
			"stage moves skb allocation but not GRO", k))
	default:
		add(CheckCPUMapGRO, OK, "cpumap with GRO (6.15+)")
	}
	fs = append(fs, bpfQdiscFinding(datapath.BPFQdiscSupported()))
	if kernel.TracefsMounted() {
		add(CheckTracefs, OK, "tracefs mounted")
	} else {
		fs = append(fs, Finding{Check: CheckTracefs, Severity: Info,
			Message: "tracefs is not mounted: per-stage CPU tracing (bench) will mount it when it runs",
			Fix:     "mount -t tracefs nodev /sys/kernel/tracing"})
	}
	for _, d := range st.role(discover.RoleNIC) {
		fs = append(fs, checkXDP(d))
	}
	return fs
}

// bpfQdiscFinding reports the BPF qdisc (CONFIG_NET_SCH_BPF, 6.16+), which
// MFLOW's in-order reassembly would need (docs/split-and-mflow.md). falcon ships no
// BPF qdisc, so its absence is information, never a problem.
func bpfQdiscFinding(err error) Finding {
	const what = "BPF qdisc (in-order reassembly for mflow)"
	if err != nil {
		return Finding{Check: CheckBPFQdisc, Severity: Info, Message: fmt.Sprintf("%s: %v; nothing falcon ships needs it", what, err)}
	}
	return Finding{Check: CheckBPFQdisc, Severity: OK, Message: what + " available (CONFIG_NET_SCH_BPF); falcon ships none yet"}
}

// checkXDP asks the driver what XDP it implements (netdev netlink family,
// 6.3+) instead of attaching a test program: attaching XDP makes many
// drivers reset their rings, a link flap a diagnosis must not cause.
func checkXDP(d *devState) Finding {
	f := Finding{Check: CheckXDP, Device: d.Name, Netns: d.Netns}
	drv := d.driver
	if drv == "" {
		drv = "unknown driver"
	}
	attached := ""
	if d.xdp != nil && d.xdp.Attached {
		attached = fmt.Sprintf("; an XDP program (id %d) is attached in mode %d", d.xdp.ProgId, d.xdp.AttachMode)
	}
	need := uint64(datapath.XDPActBasic | datapath.XDPActRedirect)
	switch {
	case d.xdpErr != nil:
		f.Severity = Info
		f.Message = fmt.Sprintf("driver %s: cannot ask it for its XDP features (%v)%s", drv, d.xdpErr, attached)
	case d.xdpFeatures&need == need:
		f.Severity = OK
		f.Message = fmt.Sprintf("driver %s has native XDP with redirect: the NIC stage can be split by cpumap%s", drv, attached)
		if d.Kind == "veth" {
			f.Severity = Info
			f.Message += ". This NIC is a veth: its sending end must run with tx checksum offload off " +
				"(ethtool -K <peer> tx off), or frames redirected through cpumap lose their checksum trust and are dropped"
		}
	default:
		f.Severity = Info
		f.Message = fmt.Sprintf("driver %s has no native XDP redirect (features %#x): generic XDP runs after skb allocation, "+
			"so the NIC stage cannot be split%s", drv, d.xdpFeatures, attached)
	}
	return f
}
