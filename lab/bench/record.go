package bench

import (
	"github.com/falconnet/falcon/lab/schema"
)

// tcpReorder reads a window's counter deltas (counterKeys, and the order
// check's with --order-check) into a TCPReorder.
func tcpReorder(c map[string]int64, orderChecked bool) *schema.TCPReorder {
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
