package agent

import (
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
)

// TestEntryCountsBudget: the published entry counts are taken again only
// once the budget allows since the last walk, or at once when the
// generation changes; in between the last ones stand.
func TestEntryCountsBudget(t *testing.T) {
	needRoot(t)
	if err := datapath.FastPathSupported(); err != nil {
		t.Skip(err)
	}
	fp, err := datapath.NewFastPath([]int{4789})
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	var c entryCounts
	fill := func() datapath.FastStats {
		t.Helper()
		st, err := fp.Counted()
		if err == nil {
			err = c.fill(fp, &st)
		}
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := fill(); st.IngressEntries != 0 || c.at.IsZero() {
		t.Fatalf("first fill: %d entries, counted at %v", st.IngressEntries, c.at)
	}
	// A walk that took an hour: the next may come 50 hours later; the
	// counts in between are the last ones (7, as if counted then).
	c.took, c.in = time.Hour, 7
	if st := fill(); st.IngressEntries != 7 {
		t.Errorf("within the budget: %d entries, want the last count, 7", st.IngressEntries)
	}
	if err := fp.Invalidate(); err != nil {
		t.Fatal(err)
	}
	if st := fill(); st.IngressEntries != 0 || c.gen != st.Generation {
		t.Errorf("after an invalidation: %d entries of generation %d, want a new count (0) of %d", st.IngressEntries, c.gen, st.Generation)
	}
	c.took, c.at = time.Millisecond, time.Now().Add(-time.Second)
	c.in = 7
	if st := fill(); st.IngressEntries != 0 {
		t.Errorf("past the budget: %d entries, want a new count (0)", st.IngressEntries)
	}
}
