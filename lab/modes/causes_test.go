package modes

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cause"
)

// TestCauseRecord: a turn of the agent's, every field set, is recorded as
// the agent writes it; a field the agent gains fails this until the
// results file's types say whether to record it.
func TestCauseRecord(t *testing.T) {
	r := agent.CauseRecord{Seq: 7, At: time.Date(2026, 12, 2, 12, 0, 0, 5, time.UTC),
		Window: cause.Window{Ms: 150, CPUs: []cause.CPU{{ID: 1, Busy: 99, Softirq: 60, BusyTicks: 15, NetRx: 4, Dropped: 3, Squeezed: 2}},
			AppCPUs: []int{1}, NICCPUs: []int{0}, Listed: true, NewSockets: true, Delivered: 10, SockDrops: 1, Engaged: true, Unreadable: "x"},
		Step: cause.Step{Phase: "confirming", Action: "engage", Fallback: true,
			Verdict: cause.Verdict{Bottleneck: 1, Saturated: true, Dropping: true, Targets: []int{2}, AppKnown: true, Engage: true, Readable: true, Why: "y"},
			Confirm: &cause.Confirmation{Outcome: "pays", BaseCost: 1, Cost: 2, BaseRate: 3, Rate: 4, Wins: 5, Losses: 6, Ms: 7, Why: "z"}}}
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(causeRecord(r))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("recorded\n%s\nthe agent's\n%s", got, want)
	}
	p := cause.Params{Threshold: 85, Set: []int{0, 2}}
	want, _ = json.Marshal(p)
	if got, _ = json.Marshal(causeParams(p)); string(got) != string(want) {
		t.Errorf("params recorded %s, the agent's %s", got, want)
	}
}
