package agent

import "testing"

// Steering pays only when every window with it beats every window
// without it by the margin: a tie that the sums would call a win is not.
func TestPays(t *testing.T) {
	for _, c := range []struct {
		steering, off []uint64
		want          bool
	}{
		{[]uint64{1100, 1120}, []uint64{1000, 1010}, true},
		{[]uint64{1040, 1200}, []uint64{1000, 1020}, false}, // the sums differ by 10 %, one window by 2 %
		{[]uint64{1300, 990}, []uint64{1000, 1000}, false},  // a window lost
		{[]uint64{1030, 1030}, []uint64{1000, 1000}, false}, // exactly the margin
		{[]uint64{1031, 1040}, []uint64{1000, 1000}, true},
		{[]uint64{1031}, nil, false},
		{nil, []uint64{1}, false},
	} {
		if got := pays(c.steering, c.off); got != c.want {
			t.Errorf("pays(%v, %v) = %v, want %v", c.steering, c.off, got, c.want)
		}
	}
}
