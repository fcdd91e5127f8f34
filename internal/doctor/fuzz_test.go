package doctor

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
		k, err := parseRelease(s)
		if err != nil {
			return
		}
		if k.major < 0 && !strings.HasPrefix(s, "-") || k.minor < 0 {
			t.Fatalf("parseRelease(%q) = %d.%d", s, k.major, k.minor)
		}
		if !k.atLeast(k.major, k.minor) || k.atLeast(k.major, k.minor+1) && k.minor < 1<<62 {
			t.Fatalf("parseRelease(%q) = %d.%d: atLeast disagrees", s, k.major, k.minor)
		}
	})
}
