package kernel

import "testing"

func TestParseRelease(t *testing.T) {
	for _, c := range []struct {
		rel          string
		major, minor int
	}{{"6.18.44-fc-v669", 6, 18}, {"5.4.0-150-generic", 5, 4}, {"6.6.0", 6, 6}, {"4.19", 4, 19}, {"6.15-rc1", 6, 15}} {
		k, err := ParseRelease(c.rel)
		if err != nil || k.Major != c.major || k.Minor != c.minor {
			t.Errorf("ParseRelease(%q) = %d.%d, %v", c.rel, k.Major, k.Minor, err)
		}
	}
	if _, err := ParseRelease("linux"); err == nil {
		t.Error("ParseRelease(linux) did not fail")
	}
	k := Release{Major: 5, Minor: 7}
	if !k.AtLeast(5, 7) || k.AtLeast(5, 8) || !k.AtLeast(4, 20) || k.AtLeast(6, 0) {
		t.Error("AtLeast is wrong")
	}
}
