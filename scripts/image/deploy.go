package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// imageLine is a container's image in a manifest.
var imageLine = regexp.MustCompile(`(?m)^(\s*image:[ \t]*)(\S+)[ \t]*$`)

// pin writes the manifests (*.yaml) of dir into out, replaced whole, with
// the one image they name, the agent's, set to ref (REPOSITORY@DIGEST):
// every node then runs exactly the image this build made, never an older
// one that a mutable tag still names there. deploy/kubernetes names the
// repository alone, unpinned; nothing else in the manifests changes.
func pin(dir, out, ref string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	docs := map[string][]byte{}
	found := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n := len(imageLine.FindAll(b, -1))
		found += n
		if n > 0 {
			b = imageLine.ReplaceAll(b, []byte("${1}"+ref))
		}
		docs[filepath.Base(p)] = b
	}
	if found != 1 {
		return fmt.Errorf("%s names %d images, want the agent's alone: cannot tell which to pin", dir, found)
	}
	tmp := out + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, b := range docs {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// repository is the repository of a tagged reference (REPO:TAG).
func repository(tag string) string {
	return tag[:strings.LastIndex(tag, ":")]
}
