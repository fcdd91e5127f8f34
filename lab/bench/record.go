package bench

import (
	"time"

	"github.com/falconnet/falcon/internal/agent"
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

func falconActivity(before, after agent.Activity) *schema.FalconActivity {
	d := after.Spent.Sub(before.Spent)
	if after.Spent.Loaded == 0 || d.Loaded <= 0 {
		return nil // not falcon's datapath
	}
	pct := func(x time.Duration) float64 { return 100 * x.Seconds() / d.Loaded.Seconds() }
	a, b := after.Causes, before.Causes
	return &schema.FalconActivity{OnPathPct: pct(d.OnPath), EngagedPct: pct(d.Engaged), Comebacks: d.Comebacks,
		StandDowns: d.StandDowns, Tests: after.Tests - before.Tests, ForSteering: after.ForSteering - before.ForSteering,
		Probes: ptr(after.Probes - before.Probes), Thin: ptr(after.Thin - before.Thin),
		Causes: &schema.CauseActivity{Params: a.Params, Engage: a.Engage - b.Engage, Inline: a.Inline - b.Inline, Unreadable: a.Unreadable - b.Unreadable,
			Begun: a.Begun - b.Begun, Pays: a.Pays - b.Pays, Fails: a.Fails - b.Fails}}
}

// causesWithin: the turns up to seq (the window's end).
func causesWithin(rs []agent.CauseRecord, seq uint64) []agent.CauseRecord {
	var out []agent.CauseRecord
	for _, r := range rs {
		if r.Seq <= seq {
			out = append(out, r)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
