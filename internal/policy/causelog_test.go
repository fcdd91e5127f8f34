package policy

import (
	"slices"
	"testing"

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
	var l Log
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
		l.add(cause.Params{}, Record{Step: s})
	}
	c := l.Snapshot()
	if c.Engage+c.Inline+c.Unreadable != causeKeep+5 || c.Unreadable != 1 || c.Begun != 1 || c.Fails != 1 || c.Last.Seq != causeKeep+5 {
		t.Errorf("counts %+v", c)
	}
	rs, last := l.Since(causeKeep + 2)
	if len(rs) != 3 || rs[0].Seq != causeKeep+3 || last != causeKeep+5 {
		t.Errorf("since: %d records from %d, last %d", len(rs), rs[0].Seq, last)
	}
	if all, _ := l.Since(0); len(all) != causeKeep || all[0].Seq != 6 {
		t.Errorf("kept %d from %d", len(all), all[0].Seq)
	}
}
