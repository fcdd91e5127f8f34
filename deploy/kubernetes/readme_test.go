package kubernetes

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's settings table lists exactly the ConfigMap's keys: a key
// added to one and not the other would leave users a setting they cannot
// find, or one that does nothing.
func TestReadmeListsConfigMapKeys(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Configure")
	if !ok {
		t.Fatal("README.md has no '## Configure' section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z.<> -]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if !isModeKey(m[1]) || m[1] == "mode" {
			listed = append(listed, m[1])
		}
	}
	var keys []string
	for k := range objects(t)["ConfigMap"].Data {
		keys = append(keys, k)
	}
	slices.Sort(listed)
	slices.Sort(keys)
	if !slices.Equal(listed, keys) {
		t.Errorf("README.md's settings table lists %v; the ConfigMap has %v", listed, keys)
	}
}
