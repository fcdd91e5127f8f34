package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func archiveOf(t *testing.T, in inputs) []byte {
	t.Helper()
	img, err := build(in)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := writeArchive(&buf, img, []string{"localhost/falcon:abc1234", "localhost/falcon:latest"}, in.created); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Equal inputs give equal bytes, whenever and wherever they are built.
func TestArchiveIsReproducible(t *testing.T) {
	in := inputs{
		falcon: []byte("#!/bin/sh\necho falcon abc1234\n"), version: "abc1234", created: time.Unix(1700000000, 0).UTC(),
		tools: []file{{name: "/usr/sbin/nft", mode: 0o755, data: []byte("nft")}, {name: "/lib64/ld.so", link: "/lib/ld.so"}},
	}
	a, b := archiveOf(t, in), archiveOf(t, in)
	if !bytes.Equal(a, b) {
		t.Fatal("two builds of the same inputs differ")
	}
	in.falcon = append(in.falcon, '#')
	if bytes.Equal(a, archiveOf(t, in)) {
		t.Fatal("a different binary gave the same archive")
	}
}

// Both the docker-archive and the OCI layout name blobs that are there,
// each stored under its own digest.
func TestArchiveIsConsistent(t *testing.T) {
	in := inputs{falcon: []byte("bin"), version: "abc1234", created: time.Unix(1700000000, 0).UTC()}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archiveOf(t, in)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
		if hex, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok && hex != "" && sha256hex(b) != hex {
			t.Errorf("%s holds content of digest %s", h.Name, sha256hex(b))
		}
	}
	var dm []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &dm); err != nil || len(dm) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	for _, p := range append(dm[0].Layers, dm[0].Config) {
		if _, ok := files[p]; !ok {
			t.Errorf("manifest.json names %s, which the archive lacks", p)
		}
	}
	var idx struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 3 {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	for _, m := range idx.Manifests {
		if _, ok := files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")]; !ok {
			t.Errorf("index.json names manifest %s, which the archive lacks", m.Digest)
		}
	}
	if got := idx.Manifests[0].Annotations["io.containerd.image.name"]; got != "localhost/falcon:abc1234" {
		t.Errorf("containerd would name the image %q", got)
	}
	if got, want := idx.Manifests[2].Annotations["io.containerd.image.name"], "localhost/falcon@"+idx.Manifests[0].Digest; got != want {
		t.Errorf("containerd would name the image by digest %q, want %q", got, want)
	}
	if _, ok := files["oci-layout"]; !ok {
		t.Error("no oci-layout")
	}
}

func TestFullName(t *testing.T) {
	for in, want := range map[string]string{
		"falcon:v1":                "docker.io/library/falcon:v1",
		"me/falcon:v1":             "docker.io/me/falcon:v1",
		"localhost/falcon:v1":      "localhost/falcon:v1",
		"reg.example:5000/f/g:v1":  "reg.example:5000/f/g:v1",
		"ghcr.io/falconnet/f:v1.2": "ghcr.io/falconnet/f:v1.2",
	} {
		if got := fullName(in); got != want {
			t.Errorf("fullName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDependencies(t *testing.T) {
	got := strings.Join(dependencies("Pre-Depends: libc6 (>= 2.34)\nDepends: libssl3 | libssl1.1, foo:any (>= 1), bar\n"), " ")
	if want := "libc6 libssl3 foo bar"; got != want {
		t.Errorf("dependencies = %q, want %q", got, want)
	}
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// go-containerregistry builds the image; the product must not carry it.
func TestProductDoesNotImportTheBuilder(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/falcon", "../../internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "go-containerregistry") {
		t.Error("cmd/falcon or internal/ depends on go-containerregistry: keep it to scripts/image")
	}
}
