package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cause"
)

// status --explain says the latest turn's inputs and verdict, and the
// decisions that acted.
func TestWriteExplain(t *testing.T) {
	var b strings.Builder
	(&Report{}).WriteExplain(&b)
	if !strings.Contains(b.String(), "no decision by cause yet") {
		t.Errorf("without a decision: %q", b.String())
	}
	b.Reset()
	(&Report{Engagement: &Engagement{Never: "the CPU set [0 1] has 2 CPUs"}}).WriteExplain(&b)
	if !strings.Contains(b.String(), "never on the path (the CPU set [0 1] has 2 CPUs)") {
		t.Errorf("a set too small: %q", b.String())
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
