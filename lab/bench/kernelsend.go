package bench

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// MaxKernelSize is the largest datagram the kernel sender sends: one frame
// per datagram, so it must fit the overlay's MTU without fragments.
const MaxKernelSize = testbed.OverlayMTU - 20 - 8

// kernelSends checks that the kernel sender can drive workload w at sizes.
func kernelSends(w workload.Kind, sizes []int) error {
	if !w.Kernel {
		var ok []string
		for _, k := range workload.All() {
			if k.Kernel {
				ok = append(ok, k.Name)
			}
		}
		return fmt.Errorf("--sender kernel drives %s only, not %s", strings.Join(ok, ", "), w.Name)
	}
	for _, n := range sizes {
		if n > MaxKernelSize {
			return fmt.Errorf("--sender kernel: %d B does not fit one frame of the overlay (at most %d B)", n, MaxKernelSize)
		}
	}
	return nil
}
