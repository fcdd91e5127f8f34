package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// make image writes deploy/kubernetes with the agent's image pinned to the
// digest of the image it built, and changes nothing else: the DaemonSet
// applied runs that build and no other.
func TestPinnedManifests(t *testing.T) {
	in := inputs{falcon: []byte("bin"), version: "abc1234", created: time.Unix(1700000000, 0).UTC()}
	img, err := build(in)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	d, err := writeArchive(&buf, img, []string{"localhost/falcon:abc1234", "localhost/falcon:latest"}, in.created)
	if err != nil {
		t.Fatal(err)
	}
	const deploy = "../../deploy/kubernetes"
	out := filepath.Join(t.TempDir(), "kubernetes")
	ref := "localhost/falcon@" + d.String()
	if err := pin(deploy, out, ref); err != nil {
		t.Fatal(err)
	}
	srcs, _ := filepath.Glob(filepath.Join(deploy, "*.yaml"))
	outs, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
	if len(srcs) == 0 || len(outs) != len(srcs) {
		t.Fatalf("%d manifests written of %d", len(outs), len(srcs))
	}
	pinned := 0
	for _, src := range srcs {
		a, _ := os.ReadFile(src)
		b, err := os.ReadFile(filepath.Join(out, filepath.Base(src)))
		if err != nil {
			t.Fatal(err)
		}
		al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
		if len(al) != len(bl) {
			t.Fatalf("%s: %d lines pinned, %d shipped", src, len(bl), len(al))
		}
		for i := range al {
			if al[i] == bl[i] {
				continue
			}
			pinned++
			if strings.TrimSpace(bl[i]) != "image: "+ref || strings.Contains(al[i], "@") {
				t.Errorf("%s:%d: %q became %q, want the shipped, unpinned image pinned to %s", src, i+1, al[i], bl[i], ref)
			}
		}
	}
	if pinned != 1 {
		t.Errorf("%d lines pinned, want the agent's image alone", pinned)
	}
}

// With no image, or two, pin cannot tell which is the agent's: it writes
// nothing.
func TestPinRefusesAmbiguity(t *testing.T) {
	for _, body := range []string{"kind: DaemonSet\n", "image: a\n---\nimage: b\n"} {
		dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
		if err := os.WriteFile(filepath.Join(dir, "ds.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := pin(dir, out, "r@sha256:0"); err == nil || !strings.Contains(err.Error(), "want the agent's alone") {
			t.Errorf("%q: %v", body, err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%q: %s written", body, out)
		}
	}
}
