package modes

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
)

// A window's falcon activity is the agent's accumulated state differenced
// over the window, as shares of it; other modes have none.
func TestFalconActivity(t *testing.T) {
	before := agent.Activity{Spent: datapath.Spent{Loaded: 10 * time.Second, OnPath: 4 * time.Second, Engaged: time.Second, Comebacks: 1, StandDowns: 1}, Tests: 1, Probes: 2, Thin: 1,
		Causes: agent.CauseCounts{Engage: 1, Inline: 10, Begun: 1}}
	after := agent.Activity{Spent: datapath.Spent{Loaded: 14 * time.Second, OnPath: 5 * time.Second, Engaged: 1500 * time.Millisecond, Comebacks: 3, StandDowns: 4}, Tests: 2, ForSteering: 1, Probes: 5, Thin: 3,
		Causes: agent.CauseCounts{Engage: 4, Inline: 30, Unreadable: 2, Begun: 2, Pays: 1}}
	got := falconActivity(before, after)
	want := &schema.FalconActivity{OnPathPct: 25, EngagedPct: 12.5, Comebacks: 2, StandDowns: 3, Tests: 1, ForSteering: 1, Probes: ptr[uint64](3), Thin: ptr[uint64](2),
		Causes: &schema.CauseActivity{Engage: 3, Inline: 20, Unreadable: 2, Begun: 1, Pays: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if falconActivity(agent.Activity{}, agent.Activity{Samples: 9}) != nil {
		t.Fatal("an agent without falcon's datapath has no falcon activity")
	}
	r := schema.Result{Layout: "docker", Mode: "falcon", Workload: "udp", Size: 1000, Flows: 1, Runs: []schema.Run{{PPS: 1, Falcon: got}, {PPS: 1, Falcon: want}}}
	r.Summarize()
	var b strings.Builder
	if err := render.WriteTable(&b, &schema.File{Results: []schema.Result{r}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| docker | falcon | udp | 1000 B | 1 | 25 ± 0 | 12 ± 0 | 5.0 ± 0.0 | 3.0 ± 0.0 | 1.0 ± 0.0 | 2.0 ± 0.0 |") {
		t.Fatalf("table:\n%s", b.String())
	}
	// A file from before the tests begun were counted says it does not
	// know them, not that there were none.
	old := *want
	old.Probes, old.Thin = nil, nil
	r = schema.Result{Layout: "docker", Mode: "falcon", Workload: "udp", Size: 1000, Runs: []schema.Run{{PPS: 1, Falcon: &old}}}
	r.Summarize()
	b.Reset()
	if err := render.WriteTable(&b, &schema.File{Results: []schema.Result{r}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 5.0 | – | 1.0 | – |") {
		t.Fatalf("table of an older file:\n%s", b.String())
	}
}

// The fast path's counters over a window are both hosts' differenced;
// the table says what share of the packets it looked at it carried.
func TestFastBetween(t *testing.T) {
	recv := agent.Activity{Fast: map[string]uint64{"ingress_hit": 100, "csum_aggregate": 1}}
	send := agent.Activity{Fast: map[string]uint64{"egress_hit": 50, "egress_miss": 5}}
	read := withFast(func() agent.Activity { return recv }, func() agent.Activity { return send })
	before := Reading{read()}
	recv.Fast = map[string]uint64{"ingress_hit": 400, "csum_aggregate": 101}
	send.Fast = map[string]uint64{"egress_hit": 350, "egress_miss": 105}
	got := FastBetween(before, Reading{read()})
	want := map[string]uint64{"ingress_hit": 300, "egress_hit": 300, "egress_miss": 100, "csum_aggregate": 100}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if FastBetween(Reading{}, Reading{agent.Activity{Samples: 1}}) != nil {
		t.Fatal("a mode without the fast path has no fast path counters")
	}
	if pct, ok := schema.FastHitPct(got); !ok || pct != 75 {
		t.Fatalf("carried %v%% (%v), want 75", pct, ok)
	}
	r := schema.Result{Layout: "docker", Mode: "fastpath", Workload: "tcp", Size: 128 << 10, Flows: 1, Runs: []schema.Run{{PPS: 1, FastPath: got}}}
	r.Summarize()
	var b strings.Builder
	if err := render.WriteTable(&b, &schema.File{Results: []schema.Result{r}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| docker | fastpath | tcp | 128 KiB | 1 | 75.0 | 600 | 100 | csum_aggregate 100 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}
