// Package scripts holds the tests of the shell scripts' own logic.
package scripts

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debianMirror runs lib/debian-mirror.sh's debian_mirror over the apt
// configuration under root.
func debianMirror(t *testing.T, root string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `source lib/debian-mirror.sh && debian_mirror "$1"`, "-", root)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// TestDebianMirror: the fetching scripts' mirror is the first Debian entry
// of the machine's own apt sources, as apt reads them, in either format.
func TestDebianMirror(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		// Debian's deb822 default; a third party's source named first.
		{"deb822", "http://deb.debian.org/debian"},
		// A site mirror under a path of its own, after the security archive.
		{"site-mirror", "http://mirror.example.org/pub/debian-mirror"},
		// A caching proxy, after a commented-out entry.
		{"proxy", "http://apt-cache.internal:3142/deb.debian.org/debian"},
		// Disabled, deb-src-only and a key block's lines skipped, and a
		// file apt does not read (its name ends otherwise).
		{"disabled", "https://ftp.example.net/debian"},
		// Debian's cloud images: apt's mirror method, passed as it is.
		{"mirror-file", "mirror+file:///etc/apt/mirrors/debian.list"},
	} {
		got, err := debianMirror(t, filepath.Join("testdata", "apt", c.dir))
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.dir, got, err, c.want)
		}
	}
	got, err := debianMirror(t, filepath.Join("testdata", "apt", "ubuntu"))
	if err == nil {
		t.Errorf("ubuntu: %q, want an error: no Debian suite there", got)
	}
	got, err = debianMirror(t, filepath.Join("testdata", "apt", "ubuntu"), "FALCON_DEBIAN_MIRROR=http://m.example/debian/")
	if err != nil || got != "http://m.example/debian" {
		t.Errorf("FALCON_DEBIAN_MIRROR: %q, %v", got, err)
	}
}
