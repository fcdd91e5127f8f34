package probes

import (
	"fmt"
	"slices"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
)

// TCPReorder reads a window's counter deltas (counterKeys, and the order
// check's with --order-check) into a TCPReorder.
func TCPReorder(c map[string]int64, orderChecked bool) *schema.TCPReorder {
	var order *schema.TCPOrder
	if orderChecked {
		order = &schema.TCPOrder{Segments: c["rx.order.segments"], Reordered: c["rx.order.reordered"]}
	}
	return &schema.TCPReorder{
		Order:         order,
		InSegs:        c["rx.Tcp.InSegs"],
		OFOQueue:      c["rx.TcpExt.TCPOFOQueue"],
		OFODrop:       c["rx.TcpExt.TCPOFODrop"],
		OFOMerge:      c["rx.TcpExt.TCPOFOMerge"],
		SACKReorder:   c["tx.TcpExt.TCPSACKReorder"],
		TSReorder:     c["tx.TcpExt.TCPTSReorder"],
		DSACKRecv:     c["tx.TcpExt.TCPDSACKRecv"],
		DSACKOfoRecv:  c["tx.TcpExt.TCPDSACKOfoRecv"],
		DSACKRecvSegs: c["tx.TcpExt.TCPDSACKRecvSegs"],
		SpuriousRTOs:  c["tx.TcpExt.TCPSpuriousRTOs"],
		LostRetrans:   c["tx.TcpExt.TCPLostRetransmit"],
		Retrans:       c["tx.Tcp.RetransSegs"],
	}
}

// OrderCheck counts, on the servers' devices, the TCP segments that
// arrived out of order (--order-check): rx.order.* of every Sample.
type OrderCheck struct{ t *stagetrace.Tracer }

// StartOrderCheck starts the order check on every server's device.
func StartOrderCheck(servers []testbed.Endpoint) (*OrderCheck, error) {
	o := stagetrace.Options{Proto: 6}
	for _, s := range servers {
		if !slices.Contains(o.Netns, s.Netns) {
			o.Netns = append(o.Netns, s.Netns)
		}
		o.Seq = append(o.Seq, stagetrace.Device{Netns: s.Netns, Name: s.Dev})
	}
	tr, err := stagetrace.Start(o)
	if err != nil {
		return nil, fmt.Errorf("--order-check: %w", err)
	}
	return &OrderCheck{tr}, nil
}

// Close stops the check.
func (c *OrderCheck) Close() error { return c.t.Close() }
