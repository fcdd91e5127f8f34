package agent

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cause"
)

// Engaged by cause, the datapath sees every CPU but the targets as full.
func TestMaskLoad(t *testing.T) {
	got := maskLoad([]uint32{99, 60, 5, 7}, []int{2, 3})
	if !slices.Equal(got, []uint32{100, 100, 5, 7}) {
		t.Errorf("masked %v", got)
	}
}

// The turns are counted by verdict and kept, the oldest dropped, for
// bench's windows (CauseTrace).
func TestCauseLog(t *testing.T) {
	var l causeLog
	for i := range causeKeep + 5 {
		s := cause.Step{Verdict: cause.Verdict{Engage: i%2 == 0}}
		switch i {
		case 1:
			s.Fallback = true
		case 2:
			s.Action = cause.ActBegin
		case 3:
			s.Confirm = &cause.Confirmation{Outcome: cause.Fails}
		}
		l.add(cause.Params{}, CauseRecord{Step: s})
	}
	c := l.snapshot()
	if c.Engage+c.Inline+c.Unreadable != causeKeep+5 || c.Unreadable != 1 || c.Begun != 1 || c.Fails != 1 || c.Last.Seq != causeKeep+5 {
		t.Errorf("counts %+v", c)
	}
	rs, last := l.since(causeKeep + 2)
	if len(rs) != 3 || rs[0].Seq != causeKeep+3 || last != causeKeep+5 {
		t.Errorf("since: %d records from %d, last %d", len(rs), rs[0].Seq, last)
	}
	if all, _ := l.since(0); len(all) != causeKeep || all[0].Seq != 6 {
		t.Errorf("kept %d from %d", len(all), all[0].Seq)
	}
}

// status --explain says the latest turn's inputs and verdict, and the
// decisions that acted.
func TestWriteExplain(t *testing.T) {
	var b strings.Builder
	(&Report{}).WriteExplain(&b)
	if !strings.Contains(b.String(), "no decision by cause yet") {
		t.Errorf("without a decision: %q", b.String())
	}
	w := cause.Window{Ms: 150, CPUs: []cause.CPU{{ID: 0, Busy: 100, Softirq: 60, Squeezed: 2}, {ID: 1, Busy: 70, Softirq: 20}},
		AppCPUs: []int{1}, NICCPUs: []int{0}, Delivered: 9000}
	p := cause.Params{Threshold: 85, Set: []int{0, 1}}
	rec := CauseRecord{Seq: 3, At: time.Now(), Window: w, Step: cause.Step{Phase: cause.PhaseOff, Verdict: cause.Decide(w, p), Action: cause.ActStandDown}}
	b.Reset()
	(&Report{Engagement: &Engagement{Cause: &rec, Decisions: []CauseRecord{rec}}}).WriteExplain(&b)
	for _, want := range []string{"cpu0 100% (soft 60%, dropped 0, squeezed 2)", "applications on [1]; NIC on [0]", "action stand_down",
		"a hop needs 3", "decisions that acted"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, b.String())
		}
	}
}
