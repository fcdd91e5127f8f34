package procfs

import (
	"os"
	"testing"
)

// The -frag files were recorded in a namespace that got one fragment of an
// IPv4 and one of an IPv6 datagram whose other fragments never came.
func TestParseFragMemory(t *testing.T) {
	for file, want := range map[string]int64{"sockstat": 0, "sockstat6": 0, "sockstat-frag": 2504, "sockstat6-frag": 2488} {
		b, err := os.ReadFile("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseFragMemory(b)
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", file, got, err, want)
		}
	}
	for _, bad := range []string{"", "TCP: inuse 1\n", "FRAG: inuse 0\n", "FRAG: inuse 0 memory x\n", "FRAG6: inuse 0 memory -1\n"} {
		if v, err := ParseFragMemory([]byte(bad)); err == nil {
			t.Errorf("%q: %d, no error", bad, v)
		}
	}
}
