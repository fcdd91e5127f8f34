package modes

import (
	"maps"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/lab/schema"
)

// Reading is what a mode's agent did so far, read at one end of a
// measurement window; zero for a mode without an agent.
type Reading struct{ a agent.Activity }

// Read reads the mode's agent, if it has one.
func (su SetUp) Read() Reading {
	if su.Activity == nil {
		return Reading{}
	}
	return Reading{su.Activity()}
}

// Between is what the agent did from before to after (Run.Falcon), with
// its decisions by cause up to the window's end when it records them; nil
// for a mode without falcon's datapath.
func (su SetUp) Between(before, after Reading) *schema.FalconActivity {
	fa := falconActivity(before.a, after.a)
	if fa != nil && su.Causes != nil {
		fa.Causes.Trace = causesWithin(su.Causes(before.a.Causes.Last.Seq), after.a.Causes.Last.Seq)
	}
	return fa
}

// FastBetween is the fast path's packet counters from before to after,
// both hosts' agents summed (Run.FastPath); nil where it did not run.
func FastBetween(before, after Reading) map[string]uint64 {
	if after.a.Fast == nil {
		return nil
	}
	d := map[string]uint64{}
	for k, v := range after.a.Fast {
		d[k] = v - before.a.Fast[k] // a nil before (not yet running) reads 0
	}
	return d
}

// withFast is read whose Fast adds other's: the fast path counts each
// direction on the host it enters by, so a flow's ingress hits are the
// receiving host's and its egress hits the sending host's.
func withFast(read, other func() agent.Activity) func() agent.Activity {
	return func() agent.Activity {
		act, o := read(), other()
		if act.Fast == nil || o.Fast == nil {
			return act
		}
		sum := maps.Clone(act.Fast)
		for k, v := range o.Fast {
			sum[k] += v
		}
		act.Fast = sum
		return act
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
		Causes: &schema.CauseActivity{Params: causeParams(a.Params), Engage: a.Engage - b.Engage, Inline: a.Inline - b.Inline, Unreadable: a.Unreadable - b.Unreadable,
			Begun: a.Begun - b.Begun, Pays: a.Pays - b.Pays, Fails: a.Fails - b.Fails}}
}

// causesWithin: the turns up to seq (the window's end), as the results
// file records them.
func causesWithin(rs []agent.CauseRecord, seq uint64) []schema.CauseRecord {
	var out []schema.CauseRecord
	for _, r := range rs {
		if r.Seq <= seq {
			out = append(out, causeRecord(r))
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
