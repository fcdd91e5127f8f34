package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// A BPF qdisc (CONFIG_NET_SCH_BPF, Linux 6.16+) is a Qdisc_ops written as
// BPF struct_ops: the one queue a stock kernel lets a BPF program hold
// packets in and release them in an order of its choosing. MFLOW's in-order
// reassembly of micro-flows would need it (docs/split-and-mflow.md,
// "MFLOW's in-order reassembly on a stock kernel"); falcon ships no such qdisc, so this is a
// probe only, for 'falcon doctor' and for whoever builds it.

// Names in the kernel's BTF that exist only where CONFIG_NET_SCH_BPF is on
// (net/sched/bpf_qdisc.c). register_bpf_struct_ops(&bpf_Qdisc_ops,
// Qdisc_ops) emits the value type struct bpf_struct_ops_Qdisc_ops, which is
// what a struct_ops map for a qdisc is created from; struct Qdisc_ops itself
// is in every kernel with net/sched and tells nothing.
const (
	bpfQdiscStructOps = "bpf_struct_ops_Qdisc_ops"
	bpfQdiscDropKfunc = "bpf_qdisc_skb_drop"
)

// BPFQdiscSupported returns nil when the running kernel could host a BPF
// qdisc, else an error saying why not. It reads the kernel's BTF and changes
// nothing; it needs no privileges where /sys/kernel/btf/vmlinux is readable.
func BPFQdiscSupported() error {
	release := kernelReleaseString()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		if errors.Is(err, btf.ErrNotSupported) {
			return fmt.Errorf("this kernel (%s) has no BTF (/sys/kernel/btf/vmlinux), which a BPF qdisc needs "+
				"(CONFIG_NET_SCH_BPF depends on CONFIG_DEBUG_INFO_BTF): falcon's mflow mode cannot reassemble "+
				"micro-flows in order here, TCP's out-of-order queue does", release)
		}
		return fmt.Errorf("this kernel (%s): cannot read its BTF to look for a BPF qdisc (CONFIG_NET_SCH_BPF): %w", release, err)
	}
	return bpfQdiscIn(spec, release)
}

// bpfQdiscIn decides from a kernel's BTF: the struct_ops value type for
// Qdisc_ops and the qdisc kfunc bpf_qdisc_skb_drop must both be there.
func bpfQdiscIn(spec *btf.Spec, release string) error {
	var st *btf.Struct
	stErr := spec.TypeByName(bpfQdiscStructOps, &st)
	var fn *btf.Func
	fnErr := spec.TypeByName(bpfQdiscDropKfunc, &fn)
	for _, err := range []error{stErr, fnErr} {
		if err != nil && !errors.Is(err, btf.ErrNotFound) {
			return fmt.Errorf("this kernel (%s): reading its BTF for a BPF qdisc: %w", release, err)
		}
	}
	switch {
	case stErr == nil && fnErr == nil:
		return nil
	case stErr != nil && fnErr != nil:
		return fmt.Errorf("this kernel (%s) has no BPF qdisc: CONFIG_NET_SCH_BPF (Linux 6.16+) is off or absent "+
			"(its BTF has neither struct %s nor the kfunc %s); falcon's mflow mode cannot reassemble micro-flows "+
			"in order here, TCP's out-of-order queue does", release, bpfQdiscStructOps, bpfQdiscDropKfunc)
	case stErr != nil:
		return fmt.Errorf("this kernel (%s) has the kfunc %s but no struct %s: Qdisc_ops is not registered as "+
			"struct_ops, so there is no BPF qdisc (CONFIG_NET_SCH_BPF, Linux 6.16+) to load", release, bpfQdiscDropKfunc, bpfQdiscStructOps)
	default:
		return fmt.Errorf("this kernel (%s) registers Qdisc_ops as struct_ops but its BTF lacks the kfunc %s: "+
			"a BPF qdisc could not drop packets, so falcon would not load one", release, bpfQdiscDropKfunc)
	}
}

func kernelReleaseString() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown release"
	}
	return unix.ByteSliceToString(u.Release[:])
}
