package workload

import "testing"

// TestCatalogueEntries: each entry says what the bench, its drivers and
// the report ask of it, consistently.
func TestCatalogueEntries(t *testing.T) {
	for _, w := range kinds {
		switch {
		case w.Driver == "" || w.Tool == "" || w.Summary == "":
			t.Errorf("%s: no driver, tool or summary", w.Name)
		case w.Latency && w.LatencyIs == "":
			t.Errorf("%s: judged by latency, but what its latency is is not said", w.Name)
		case w.Pairs == PairPerFlow && !w.Flows:
			t.Errorf("%s: a pair per flow without the --flows dimension", w.Name)
		case w.FlowsAre != "" && !w.Flows:
			t.Errorf("%s: says what --flows counts, without the --flows dimension", w.Name)
		case w.Kernel && w.TCP:
			t.Errorf("%s: the kernel sender sends UDP only", w.Name)
		case !w.TCP && w.MaxSize > MaxUDPSize:
			t.Errorf("%s: UDP, with sizes beyond a datagram's", w.Name)
		}
	}
}
