package kernel

import (
	"strings"
	"testing"
)

// FuzzParseRelease: a kernel release (uname -r) is a version or an error,
// never a panic; what it reads is the release's leading numbers.
func FuzzParseRelease(f *testing.F) {
	for _, s := range []string{"6.18.0-1-amd64", "6.1.0-28-cloud-amd64", "5.15-rc1", "6", "", ".", "x.y", "6.12.9+deb13", "99999999999999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseRelease(s)
		if err != nil {
			return
		}
		if k.Major < 0 && !strings.HasPrefix(s, "-") || k.Minor < 0 {
			t.Fatalf("ParseRelease(%q) = %d.%d", s, k.Major, k.Minor)
		}
		if !k.AtLeast(k.Major, k.Minor) || k.AtLeast(k.Major, k.Minor+1) && k.Minor < 1<<62 {
			t.Fatalf("ParseRelease(%q) = %d.%d: AtLeast disagrees", s, k.Major, k.Minor)
		}
	})
}
