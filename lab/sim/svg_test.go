package sim

import (
	"slices"
	"testing"
)

// The dashed lines come from the papers' data now; they must still say
// what FALCON's Fig. 13 says.
func TestPaperRefs(t *testing.T) {
	for flows, want := range map[int]reference{
		1: {1, "FALCON Fig. 13: 1 flow, no change"},
		4: {1.63, "FALCON Fig. 13: up to +63 % (multi-flow UDP)"},
	} {
		if got := paperRefs(flows); !slices.Equal(got, []reference{want}) {
			t.Errorf("%d flow(s): %+v, want %+v", flows, got, want)
		}
	}
}
