package modes

import (
	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cause"
	"github.com/falconnet/falcon/lab/schema"
)

// The agent's decisions by cause, as the results file records them
// (lab/schema's own types, so that the agent's may change without changing
// the file's format).

func causeParams(p cause.Params) schema.CauseParams {
	return schema.CauseParams{Threshold: p.Threshold, Set: p.Set}
}

func causeRecord(r agent.CauseRecord) schema.CauseRecord {
	w := r.Window
	sw := schema.CauseWindow{Ms: w.Ms, AppCPUs: w.AppCPUs, NICCPUs: w.NICCPUs, Listed: w.Listed, NewSockets: w.NewSockets,
		Delivered: w.Delivered, SockDrops: w.SockDrops, Engaged: w.Engaged, Unreadable: w.Unreadable}
	for _, c := range w.CPUs {
		sw.CPUs = append(sw.CPUs, schema.CauseCPU{ID: c.ID, Busy: c.Busy, Softirq: c.Softirq, BusyTicks: c.BusyTicks,
			NetRx: c.NetRx, Dropped: c.Dropped, Squeezed: c.Squeezed})
	}
	s, v := r.Step, r.Step.Verdict
	ss := schema.CauseStep{Phase: s.Phase, Action: s.Action, Fallback: s.Fallback,
		Verdict: schema.CauseVerdict{Bottleneck: v.Bottleneck, Saturated: v.Saturated, Dropping: v.Dropping, Targets: v.Targets,
			AppKnown: v.AppKnown, Engage: v.Engage, Readable: v.Readable, Why: v.Why}}
	if c := s.Confirm; c != nil {
		ss.Confirm = &schema.CauseConfirmation{Outcome: c.Outcome, BaseCost: c.BaseCost, Cost: c.Cost, BaseRate: c.BaseRate,
			Rate: c.Rate, Wins: c.Wins, Losses: c.Losses, Ms: c.Ms, Why: c.Why}
	}
	return schema.CauseRecord{Seq: r.Seq, At: r.At, Window: sw, Step: ss}
}
