package stagetrace

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/falconnet/falcon/internal/netns"
)

// attachTC attaches the order check to each sequence device's tcx ingress,
// from inside its namespace (a link outlives the thread's visit), ahead of
// every other program there: tcx runs the next only after one that
// returns TCX_NEXT, and the fast path's own ends with a verdict.
func (t *Tracer) attachTC(devs []Device, p *ebpf.Program) error {
	for _, d := range devs {
		err := netns.Do(d.Netns, func() error {
			i, err := net.InterfaceByName(d.Name)
			if err != nil {
				return err
			}
			l, err := link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: p, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
			if err != nil {
				return err
			}
			t.tc = append(t.tc, l)
			return nil
		})
		if err != nil {
			return fmt.Errorf("order check on %s's tc ingress: %w", d, err)
		}
	}
	t.hook += " + tcx ingress of the sequence devices"
	return nil
}
