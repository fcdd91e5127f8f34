package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

// Supported reports, with a clear error, whether this kernel and these
// privileges can run the datapath. It changes nothing on the system.
func Supported() error {
	check := func(what string, err error) error {
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return fmt.Errorf("this kernel lacks %s, which falcon needs (Linux 4.18 or newer with CONFIG_BPF_SYSCALL, CONFIG_NET_CLS_BPF)", what)
		default:
			return fmt.Errorf("probing %s: %w (falcon needs root or CAP_BPF+CAP_NET_ADMIN)", what, err)
		}
	}
	if err := check("BPF tc programs (SCHED_CLS)", features.HaveProgramType(ebpf.SchedCLS)); err != nil {
		return err
	}
	if err := check("the BPF helper bpf_set_hash for tc programs", features.HaveProgramHelper(ebpf.SchedCLS, asm.FnSetHash)); err != nil {
		return err
	}
	for _, mt := range []ebpf.MapType{ebpf.Array, ebpf.PerCPUArray, ebpf.PerCPUHash, ebpf.LRUHash} {
		if err := check("BPF maps of type "+mt.String(), features.HaveMapType(mt)); err != nil {
			return err
		}
	}
	return nil
}
