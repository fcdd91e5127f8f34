// Command image builds falcon's node agent image as a tarball, with no
// container daemon and no registry (make image):
//
//	go run ./scripts/image -falcon bin/falcon -epoch $(git log -1 --format=%ct)
//
// The image holds the static falcon binary and nft with the libraries it
// loads (the agent's fast path reads the host's ruleset with it), taken
// from Debian's packages (apt-get download, cached in .cache/image-debs),
// never from the building host's /usr. The tarball is both a docker-archive
// (manifest.json) and an OCI image layout (index.json), so `docker load`,
// `podman load` and `ctr images import` all accept it. It is reproducible:
// the same binary, packages and epoch give the same bytes and digest.
//
// It lives under scripts/ so that go-containerregistry stays out of the
// product's import graph.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// tagRE is what a tag may be (the distribution spec).
var tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func main() {
	falcon := flag.String("falcon", "bin/falcon", "the static falcon binary (make build)")
	repo := flag.String("repo", "localhost/falcon", "the image's repository; the tags are its version and -alias")
	alias := flag.String("alias", "latest", "a second tag, for docker run and the like (\"\": none; the DaemonSet is pinned by digest: -deploy)")
	out := flag.String("out", "build/falcon-image.tar", "the tarball to write")
	cache := flag.String("cache", ".cache/image-debs", "where the Debian packages are kept")
	tool := flag.String("tool", "nftables:/usr/sbin/nft", "PACKAGE:PATH of a tool to carry with its libraries (\"\": none)")
	epoch := flag.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the image's time, in seconds since 1970 (default $SOURCE_DATE_EPOCH)")
	deploy := flag.String("deploy", "", "manifests (deploy/kubernetes) to write, pinned to the image's digest, into -deploy-out (\"\": none)")
	deployOut := flag.String("deploy-out", "build/kubernetes", "where the pinned manifests go (replaced whole)")
	flag.Parse()
	d, err := run(*falcon, *repo, *alias, *out, *cache, *tool, *epoch)
	if err == nil && *deploy != "" {
		ref := *repo + "@" + d.String()
		if err = pin(*deploy, *deployOut, ref); err == nil {
			fmt.Printf("%s: %s with the agent's image %s\n", *deployOut, *deploy, ref)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds the image into out and returns its manifest's digest.
func run(falcon, repo, alias, out, cache, tool, epoch string) (v1.Hash, error) {
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("-epoch %q: want seconds since 1970 (make image passes the commit's time)", epoch)
	}
	version, err := binaryVersion(falcon)
	if err != nil {
		return v1.Hash{}, err
	}
	tags := []string{repo + ":" + version}
	if alias != "" && alias != version {
		if !tagRE.MatchString(alias) {
			return v1.Hash{}, fmt.Errorf("-alias %q is not a valid tag", alias)
		}
		tags = append(tags, repo+":"+alias)
	}
	bin, err := os.ReadFile(falcon)
	if err != nil {
		return v1.Hash{}, err
	}
	in := inputs{falcon: bin, version: version, created: time.Unix(secs, 0).UTC()}
	if tool != "" {
		pkg, p, ok := strings.Cut(tool, ":")
		if !ok {
			return v1.Hash{}, fmt.Errorf("-tool %q: want PACKAGE:PATH", tool)
		}
		debs, err := fetchDebs(cache, pkg)
		if err != nil {
			return v1.Hash{}, err
		}
		files, err := debFiles(debs)
		if err != nil {
			return v1.Hash{}, err
		}
		if in.tools, err = closure(files, p); err != nil {
			return v1.Hash{}, err
		}
	}
	img, err := build(in)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return v1.Hash{}, err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.Remove(tmp)
	d, err := writeArchive(f, img, tags, in.created)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return v1.Hash{}, err
	}
	st, err := os.Stat(out)
	if err != nil {
		return v1.Hash{}, err
	}
	fmt.Printf("%s: %s, manifest %s, %.1f MiB\n", out, strings.Join(tags, " "), d, float64(st.Size())/(1<<20))
	return d, nil
}

// binaryVersion is what `falcon version` prints, the version the image is
// tagged with: a commit, never the unstamped "dev" of a plain go build.
func binaryVersion(falcon string) (string, error) {
	b, err := exec.Command(falcon, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w (make build first)", falcon, err)
	}
	v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "falcon "))
	if v == "" || v == "dev" || !tagRE.MatchString(v) {
		return "", fmt.Errorf("%s version says %q: build it with make build, which stamps the commit", falcon, v)
	}
	return v, nil
}
