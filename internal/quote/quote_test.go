package quote

import (
	"strings"
	"testing"
)

func TestShort(t *testing.T) {
	for in, want := range map[string]string{
		"":                             `""`,
		"a\nb":                         `"a\nb"`,
		strings.Repeat("x", Max):       `"` + strings.Repeat("x", Max) + `"`,
		strings.Repeat("x", 1e5):       `"` + strings.Repeat("x", Max) + `"…`,
		strings.Repeat("é", Max):       `"` + strings.Repeat("é", Max/2) + `"…`,
		"x" + strings.Repeat("é", Max): `"x` + strings.Repeat("é", Max/2-1) + `"…`,
	} {
		if got := Short(in); got != want {
			t.Errorf("Short(%d bytes) = %s, want %s", len(in), got, want)
		}
	}
}

func FuzzShort(f *testing.F) {
	f.Add("0-3,6")
	f.Fuzz(func(t *testing.T, s string) {
		if q := Short(s); len(q) > 4*Max+8 {
			t.Errorf("%d bytes quoted for %d", len(q), len(s))
		}
	})
}
