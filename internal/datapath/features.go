package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// XDP features a driver reports, NETDEV_XDP_ACT_* of include/uapi/linux/netdev.h.
const (
	XDPActBasic    = 1 << 0 // XDP_PASS/DROP/ABORTED in the driver: native XDP
	XDPActRedirect = 1 << 1 // XDP_REDIRECT from the driver (into a cpumap among others)
)

// From include/uapi/linux/netdev.h.
const (
	netdevFamily          = "netdev"
	netdevVersion         = 1
	netdevCmdDevGet       = 1
	netdevAttrIfindex     = 1
	netdevAttrXDPFeatures = 3
)

// XDPFeatures returns the NETDEV_XDP_ACT_* bits that the driver of ifindex
// in namespace ns ("" = current) reports, from the netdev netlink family
// (Linux 6.3+). Asking changes nothing, where attaching a test program
// would make many drivers reset their rings.
func XDPFeatures(ns string, ifindex int) (uint64, error) {
	var bits uint64
	err := netns.Do(ns, func() error {
		fam, err := netlink.GenlFamilyGet(netdevFamily)
		if err != nil {
			return fmt.Errorf("no netdev netlink family (kernel older than 6.3?): %w", err)
		}
		req := nl.NewNetlinkRequest(int(fam.ID), 0)
		// nl.Genlmsg serializes 4 bytes from a 2-byte struct, so its
		// reserved field would be whatever follows in memory; strict
		// families reject that.
		req.AddRawData([]byte{netdevCmdDevGet, netdevVersion, 0, 0})
		req.AddRawData(nl.NewRtAttr(netdevAttrIfindex, nl.Uint32Attr(uint32(ifindex))).Serialize())
		msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if len(m) < nl.SizeofGenlmsg {
				continue
			}
			attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
			if err != nil {
				return err
			}
			for _, a := range attrs {
				if a.Attr.Type == netdevAttrXDPFeatures && len(a.Value) == 8 {
					bits = binary.NativeEndian.Uint64(a.Value)
					return nil
				}
			}
		}
		return errors.New("the kernel did not report XDP features")
	})
	return bits, err
}

// CPUMapGRO reports whether the kernel's cpumap runs GRO on the skbs it
// builds (the cpumap GRO series, Linux 6.15). It reads the kernel's BTF for
// the member that series added (struct bpf_cpu_map_entry.gro), so
// backports count too.
func CPUMapGRO() (bool, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false, fmt.Errorf("no kernel BTF to tell: %w", err)
	}
	var st *btf.Struct
	if err := spec.TypeByName("bpf_cpu_map_entry", &st); err != nil {
		return false, fmt.Errorf("kernel BTF has no struct bpf_cpu_map_entry: %w", err)
	}
	for _, m := range st.Members {
		if m.Name == "gro" {
			return true, nil
		}
	}
	return false, nil
}

// HaveTCX probes tcx (Linux 6.6) as cilium/ebpf does: a tcx link on an
// ifindex that cannot exist fails with ENODEV only where tcx exists.
func HaveTCX() error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	l, err := link.AttachTCX(link.TCXOptions{Interface: math.MaxInt32, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err == nil {
		l.Close()
		return nil
	}
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// SplitSupported reports, with a clear error, whether this kernel can run
// the split programs at all. It changes nothing.
func SplitSupported() error {
	if err := Supported(); err != nil {
		return err
	}
	check := func(what, since string, err error) error {
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return fmt.Errorf("this kernel lacks %s (upstream since Linux %s), which --split needs", what, since)
		default:
			return fmt.Errorf("probing %s: %w", what, err)
		}
	}
	if err := check("XDP programs", "4.8", features.HaveProgramType(ebpf.XDP)); err != nil {
		return err
	}
	if err := check("BPF cpumaps", "4.15", features.HaveMapType(ebpf.CPUMap)); err != nil {
		return err
	}
	if err := check("the BPF helper bpf_xdp_load_bytes", "5.18", features.HaveProgramHelper(ebpf.XDP, asm.FnXdpLoadBytes)); err != nil {
		return err
	}
	if err := check("the BPF helper bpf_xdp_get_buff_len", "5.18", features.HaveProgramHelper(ebpf.XDP, asm.FnXdpGetBuffLen)); err != nil {
		return err
	}
	// The split marks a split flow's frames in their metadata; some
	// kernels built for sandboxes refuse the helper to XDP programs.
	if err := check("the BPF helper bpf_xdp_adjust_meta for XDP programs", "4.15", features.HaveProgramHelper(ebpf.XDP, asm.FnXdpAdjustMeta)); err != nil {
		return err
	}
	return check("raw tracepoint programs", "4.17", features.HaveProgramType(ebpf.RawTracepoint))
}

// SplitSupport is what the kernel and a NIC's driver give splitting.
type SplitSupport struct {
	Driver      string `json:"driver,omitempty"`
	XDPFeatures uint64 `json:"xdp_features"`
	// NativeXDP: the driver runs XDP and redirects from it. Known is
	// false where the kernel cannot tell (before 6.3); attaching will.
	NativeXDP      bool `json:"native_xdp"`
	NativeXDPKnown bool `json:"native_xdp_known"`
	// OtherXDP is the id of an XDP program someone else attached there.
	OtherXDP  uint32 `json:"other_xdp,omitempty"`
	CPUMapGRO bool   `json:"cpumap_gro"`
	TCX       bool   `json:"tcx"`
	Veth      bool   `json:"veth"`
	// PeerTxChecksum: the veth's sending end offloads tx checksums (its
	// packets are then lost to splitting); PeerKnown says falcon found it.
	PeerTxChecksum bool `json:"peer_tx_checksum,omitempty"`
	PeerKnown      bool `json:"peer_known,omitempty"`
	// Notes say plainly what is lost where a feature is missing.
	Notes []string `json:"notes,omitempty"`
}

// kernelNotes: what this kernel's cpumap and tc attachment mean for the
// split, where they narrow it.
func (s *SplitSupport) kernelNotes() {
	if ok, err := CPUMapGRO(); err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("cannot tell whether cpumap runs GRO (%v): if it does not (before Linux 6.15), "+
			"split TCP reaches IP, UDP and VXLAN one segment at a time", err))
	} else if s.CPUMapGRO = ok; !ok {
		s.Notes = append(s.Notes, "this kernel's cpumap builds skbs but runs no GRO on them (Linux 6.15 added it): "+
			"split TCP flows reach IP, UDP and VXLAN one segment at a time instead of in GRO batches, which can cost "+
			"more than the split gains; consider --split-proto udp")
	}
	if err := HaveTCX(); err == nil {
		s.TCX = true
	} else {
		s.Notes = append(s.Notes, "no tcx (Linux 6.6): the tc programs attach through a clsact qdisc and cls_bpf; "+
			"steering works the same, but whoever deletes that qdisc removes them silently")
	}
}

// CheckSplit tells whether the NIC ifindex (named name, in namespace ns)
// can be split, and what the user loses where the kernel or driver lacks
// something. The error says why it cannot be split at all. It changes
// nothing.
func CheckSplit(ns string, ifindex int, name string) (SplitSupport, error) {
	var s SplitSupport
	if err := SplitSupported(); err != nil {
		return s, err
	}
	if err := netns.Check(ns); err != nil {
		return s, err
	}
	var peerNS string
	peerIdx := 0
	err := netns.Do(ns, func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return fmt.Errorf("NIC %s: %w", strings.TrimSpace(name+" (ifindex "+strconv.Itoa(ifindex)+")"), err)
		}
		if name == "" {
			name = l.Attrs().Name
		}
		if l.Attrs().Name != name {
			return fmt.Errorf("NIC %s: ifindex %d is %s now", name, ifindex, l.Attrs().Name)
		}
		s.Veth = l.Type() == "veth"
		if s.Veth {
			peerNS, peerIdx = vethPeer(ns, l)
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached && x.ProgId != 0 && !isOurs(x.ProgId) {
			s.OtherXDP = x.ProgId
		}
		if et, err := ethtool.NewEthtool(); err == nil {
			s.Driver, _ = et.DriverName(name)
			et.Close()
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	drv := s.Driver
	if drv == "" {
		drv = "unknown driver"
	}
	if bits, err := XDPFeatures(ns, ifindex); err == nil {
		s.XDPFeatures, s.NativeXDPKnown = bits, true
		s.NativeXDP = bits&(XDPActBasic|XDPActRedirect) == XDPActBasic|XDPActRedirect
	} else {
		s.Notes = append(s.Notes, fmt.Sprintf("cannot ask driver %s for its XDP features (%v): falcon tries native XDP when it attaches", drv, err))
	}
	if s.NativeXDPKnown && !s.NativeXDP {
		return s, fmt.Errorf("NIC %s (driver %s) has no native XDP with redirect (XDP features %#x): --split needs it, "+
			"and falcon does not fall back to generic XDP, which runs after skb allocation and splits nothing; "+
			"without --split falcon still pipelines the stages after the NIC", name, drv, s.XDPFeatures)
	}
	if s.OtherXDP != 0 {
		return s, fmt.Errorf("NIC %s already runs XDP program id %d, not falcon's: a device takes one XDP program, "+
			"so --split cannot be used beside it", name, s.OtherXDP)
	}
	s.kernelNotes()
	if peerIdx > 0 {
		s.PeerTxChecksum, s.PeerKnown = txChecksum(peerNS, peerIdx)
	}
	if s.Veth && (!s.PeerKnown || s.PeerTxChecksum) {
		what := "its sending end (not found)"
		if s.PeerKnown {
			what = fmt.Sprintf("its sending end (ifindex %d in network namespace %s) offloads tx checksums", peerIdx, netns.Label(peerNS))
		}
		s.Notes = append(s.Notes, fmt.Sprintf("NIC %s is a veth and %s: veth passes partially checksummed packets, "+
			"which lose the kernel's trust when cpumap rebuilds them and are dropped; run 'ethtool -K <peer> tx off' there", name, what))
	}
	return s, nil
}

// isOurs reports whether XDP program id is falcon's split program.
func isOurs(id uint32) bool {
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return false
	}
	defer p.Close()
	info, err := p.Info()
	return err == nil && info.Name == splitProgName
}

// vethPeer finds the other end of veth l (in namespace ns): its namespace,
// as a name under /run/netns when it is not ns itself, and its ifindex; 0
// when it cannot be found. Runs inside ns.
func vethPeer(ns string, l netlink.Link) (string, int) {
	a := l.Attrs()
	if a.ParentIndex == 0 {
		return "", 0
	}
	if a.NetNsID < 0 {
		return ns, a.ParentIndex
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		f, err := os.Open(filepath.Join("/run/netns", e.Name()))
		if err != nil {
			continue
		}
		id, err := netlink.GetNetNsIdByFd(int(f.Fd()))
		f.Close()
		if err == nil && id == a.NetNsID {
			return e.Name(), a.ParentIndex
		}
	}
	return "", 0
}

// txChecksum reports whether device ifindex in ns offloads tx checksums.
func txChecksum(ns string, ifindex int) (on, known bool) {
	netns.Do(ns, func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		fs, err := et.Features(l.Attrs().Name)
		if err != nil {
			return err
		}
		for _, f := range []string{"tx-checksum-ip-generic", "tx-checksum-ipv4", "tx-checksum-ipv6", "tx-checksum-sctp"} {
			on = on || fs[f]
		}
		known = true
		return nil
	})
	return on, known
}
