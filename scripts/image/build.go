package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// inputs are everything the image is made of; equal inputs give equal
// bytes.
type inputs struct {
	falcon  []byte
	version string
	tools   []file // nft and its libraries
	created time.Time
}

// binPath is where the DaemonSet runs falcon from.
const binPath = "/usr/local/bin/falcon"

// build assembles the image: the tools' layer first, as it changes
// seldom, then falcon's.
func build(in inputs) (v1.Image, error) {
	top := []file{
		{name: binPath, mode: 0o755, data: in.falcon},
		// The DaemonSet mounts an emptyDir here; runc could make the
		// mount point, but a root file system without /tmp surprises.
		{name: "/tmp/", mode: 0o1777},
	}
	var layers []v1.Layer
	for _, fs := range [][]file{in.tools, top} {
		if len(fs) == 0 {
			continue
		}
		b, err := layerTar(fs, in.created)
		if err != nil {
			return nil, err
		}
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: in.created}
	cf.History = nil
	cf.Config = v1.Config{
		Entrypoint: []string{binPath},
		Cmd:        []string{"agent"},
		// root: sysfs and the journal are root's; the DaemonSet drops
		// every capability but the few the agent needs.
		User: "0:0",
		Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.source":      "https://github.com/falconnet/falcon",
			"org.opencontainers.image.version":     in.version,
			"org.opencontainers.image.description": "falcon: multi-core softirq pipelining for container overlay networks",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// layerTar writes fs as a layer: sorted, with every parent directory,
// owned by root, all at time t.
func layerTar(fs []file, t time.Time) ([]byte, error) {
	entries := map[string]file{}
	for _, f := range fs {
		name := strings.TrimPrefix(path.Clean(f.name), "/")
		if strings.HasSuffix(f.name, "/") {
			name += "/"
		}
		entries[name] = f
		for d := path.Dir(strings.TrimSuffix(name, "/")); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := entries[d+"/"]; !ok {
				entries[d+"/"] = file{mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := entries[n]
		h := &tar.Header{Name: n, Mode: f.mode, ModTime: t, Format: tar.FormatPAX}
		switch {
		case strings.HasSuffix(n, "/"):
			h.Typeflag = tar.TypeDir
		case f.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	err := tw.Close()
	return buf.Bytes(), err
}

// writeArchive writes img as one tarball that is both a docker-archive
// (manifest.json, what docker load reads) and an OCI image layout
// (oci-layout, index.json), the blobs shared, as docker save writes since
// Docker 25, the OCI layout naming the image by each tag and by its
// digest. It returns the manifest's digest.
func writeArchive(w io.Writer, img v1.Image, tags []string, t time.Time) (v1.Hash, error) {
	a := archive{tw: tar.NewWriter(w), t: t}
	desc, err := a.blobs(img)
	if err != nil {
		return v1.Hash{}, err
	}
	cfg, err := img.ConfigName()
	if err != nil {
		return v1.Hash{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	dm := struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{Config: blobPath(cfg), RepoTags: tags}
	idx := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return v1.Hash{}, err
		}
		dm.Layers = append(dm.Layers, blobPath(d))
	}
	for _, tag := range tags {
		d := desc
		d.Annotations = map[string]string{
			// containerd's name for the image, and the OCI tag.
			"io.containerd.image.name":          fullName(tag),
			"org.opencontainers.image.ref.name": tag[strings.LastIndex(tag, ":")+1:],
		}
		idx.Manifests = append(idx.Manifests, d)
	}
	if len(tags) > 0 {
		// And by its digest, which the pinned DaemonSet names (deploy.go):
		// containerd resolves a reference only to an image of that name,
		// and a registry would give it one on a pull, an import does not.
		d := desc
		d.Annotations = map[string]string{"io.containerd.image.name": fullName(repository(tags[0]) + "@" + desc.Digest.String())}
		idx.Manifests = append(idx.Manifests, d)
	}
	for _, f := range []struct {
		name string
		v    any
	}{
		{"oci-layout", map[string]string{"imageLayoutVersion": "1.0.0"}},
		{"index.json", idx},
		{"manifest.json", []any{dm}},
	} {
		b, err := json.Marshal(f.v)
		if err != nil {
			return v1.Hash{}, err
		}
		if err := a.file(f.name, b); err != nil {
			return v1.Hash{}, err
		}
	}
	return desc.Digest, a.tw.Close()
}

// fullName is the reference as containerd and the kubelet spell it:
// a name without a registry is Docker Hub's.
func fullName(tag string) string {
	i := strings.IndexByte(tag, '/')
	if i < 0 {
		return "docker.io/library/" + tag
	}
	if first := tag[:i]; strings.ContainsAny(first, ".:") || first == "localhost" {
		return tag
	}
	return "docker.io/" + tag
}

type archive struct {
	tw *tar.Writer
	t  time.Time
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

func (a archive) file(name string, b []byte) error {
	h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: a.t, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := a.tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := a.tw.Write(b)
	return err
}

// blobs writes the layers, the config and the manifest under blobs/ and
// returns the manifest's descriptor.
func (a archive) blobs(img v1.Image) (v1.Descriptor, error) {
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		h := &tar.Header{Name: dir, Mode: 0o755, ModTime: a.t, Typeflag: tar.TypeDir, Format: tar.FormatPAX}
		if err := a.tw.WriteHeader(h); err != nil {
			return v1.Descriptor{}, err
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Descriptor{}, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return v1.Descriptor{}, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return v1.Descriptor{}, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return v1.Descriptor{}, err
		}
		if err := a.file(blobPath(d), b); err != nil {
			return v1.Descriptor{}, err
		}
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return v1.Descriptor{}, err
	}
	cn, err := img.ConfigName()
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := a.file(blobPath(cn), cfg); err != nil {
		return v1.Descriptor{}, err
	}
	m, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := a.file(blobPath(d), m); err != nil {
		return v1.Descriptor{}, fmt.Errorf("manifest: %w", err)
	}
	return v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(m))}, nil
}
