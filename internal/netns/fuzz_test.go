package netns

import (
	"strings"
	"testing"
)

// FuzzParseMounts: a mountinfo of any content gives paths or none, never a
// panic; each path is one an nsfs line named, and unescapeMount only ever
// shortens (each \ooo escape is one byte).
func FuzzParseMounts(f *testing.F) {
	for _, s := range []string{
		"36 25 0:4 net:[4026532288] /run/netns/a rw shared:5 - nsfs nsfs rw\n",
		"36 25 0:4 net:[4026532288] /run/docker/netns/with\\040space rw - nsfs nsfs rw\n",
		"22 1 0:21 / /proc rw,nosuid - proc proc rw\n", "- nsfs", "1 2 3 net:[ x - nsfs\n", "\\", "a\\1", "\\777\\00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		paths := parseMounts(b)
		if n := strings.Count(string(b), "nsfs"); len(paths) > n {
			t.Fatalf("%d paths from %d nsfs words", len(paths), n)
		}
		for _, p := range paths {
			if !strings.Contains(string(b), "net:[") {
				t.Fatalf("path %q from a mountinfo without net:[", p)
			}
		}
		if u := unescapeMount(string(b)); len(u) > len(b) {
			t.Fatalf("unescapeMount grew %q to %q", b, u)
		}
	})
}
