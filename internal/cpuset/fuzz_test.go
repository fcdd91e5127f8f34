package cpuset

import (
	"slices"
	"testing"
)

// FuzzParse: any string is a set or an error, never a panic; a set is
// sorted, free of duplicates and of negative ids, and reads back the same
// from its Format; Mask writes it whatever its ids.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "0-3,6", " 6,0-1\n", "1-2,5,1", "0-1,4", "2-5", "0,,x", "3-1", "-1", "0-99999999",
		"0-1023", "4095", "0,2-3,8-15,31-33"} {
		f.Add(s)
	}
	// What the kernel writes to /sys/devices/system/cpu/online here.
	if b, err := Online(); err == nil {
		f.Add(Format(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			return
		}
		if len(set) == 0 || !slices.IsSorted(set) || len(slices.Compact(slices.Clone(set))) != len(set) || set[0] < 0 {
			t.Fatalf("Parse(%q) = %v", s, set)
		}
		again, err := Parse(Format(set))
		if err != nil || !slices.Equal(again, set) {
			t.Fatalf("Parse(%q) = %v; Format %q reads back as %v, %v", s, set, Format(set), again, err)
		}
		Mask(set)
	})
}
