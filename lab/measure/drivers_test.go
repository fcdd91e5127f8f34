package measure

import (
	"testing"

	"github.com/falconnet/falcon/lab/workload"
)

// TestEveryWorkloadHasADriver: each workload of the catalogue names a
// driver that is here, so bench never plans a case it cannot run.
func TestEveryWorkloadHasADriver(t *testing.T) {
	used := map[workload.Driver]bool{}
	for _, w := range workload.All() {
		used[w.Driver] = true
		if drivers[w.Driver] == nil {
			t.Errorf("workload %s: no driver %q", w.Name, w.Driver)
		}
	}
	for d := range drivers {
		if !used[d] {
			t.Errorf("driver %q runs no workload of the catalogue", d)
		}
	}
}
