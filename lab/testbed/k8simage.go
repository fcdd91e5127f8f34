package testbed

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"time"
)

// The k8s layout's pod images, made from root file systems on the spot and
// imported into each node's containerd: no registry, no image builder.

const (
	// k8sPause is the pods' sandbox image (containerd's sandbox_image):
	// sleep, as pause only has to hold the pod's namespaces.
	k8sPause = "localhost/falcon-testbed/pause:1"
	// k8sServer is the pods' image: the benchmark's servers, for kubectl
	// exec; the benchmark runs its own copies in the pods' namespaces, as
	// on every layout.
	k8sServer = "localhost/falcon-testbed/server:1"
)

// k8sServerTools go into k8sServer when installed; sleep and iperf3 must be.
var k8sServerTools = []string{"sleep", "iperf3", "sockperf", "memcached", "nginx"}

// k8sImages are the images to import, as image archives.
func k8sImages() (map[string][]byte, error) {
	pause, err := rootfsImage(k8sPause, []string{"sleep"}, []string{"infinity"})
	if err != nil {
		return nil, err
	}
	var tools []string
	for _, t := range k8sServerTools {
		if _, err := exec.LookPath(t); err == nil || t == "sleep" || t == "iperf3" {
			tools = append(tools, t)
		}
	}
	server, err := rootfsImage(k8sServer, tools, []string{"infinity"})
	if err != nil {
		return nil, err
	}
	return map[string][]byte{k8sPause: pause, k8sServer: server}, nil
}

// rootfsImage is an image named ref of one layer holding tools and their
// libraries, running the first tool with args.
func rootfsImage(ref string, tools, args []string) ([]byte, error) {
	files, paths, err := toolFiles(tools)
	if err != nil {
		return nil, err
	}
	layer, err := tarFiles(files)
	if err != nil {
		return nil, err
	}
	return imageArchive(ref, layer, append([]string{paths[tools[0]]}, args...))
}

// blob is one content-addressed file of an image archive.
type blob struct {
	digest string
	data   []byte
}

func newBlob(b []byte) blob {
	sum := sha256.Sum256(b)
	return blob{"sha256:" + hex.EncodeToString(sum[:]), b}
}

func (b blob) path() string { return "blobs/sha256/" + b.digest[len("sha256:"):] }

func (b blob) descriptor(mediaType string, annotations map[string]string) map[string]any {
	d := map[string]any{"mediaType": mediaType, "digest": b.digest, "size": len(b.data)}
	if annotations != nil {
		d["annotations"] = annotations
	}
	return d
}

// imageArchive writes an image of one uncompressed layer as an OCI image
// layout with Docker's manifest.json beside it, the archive 'docker save'
// writes: 'ctr images import', 'docker load' and 'podman load' all read it.
func imageArchive(ref string, layer []byte, cmd []string) ([]byte, error) {
	l := newBlob(layer)
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": time.Unix(0, 0).UTC(),
		"config": map[string]any{"Cmd": cmd, "Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{l.digest}},
	})
	c := newBlob(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": c.descriptor("application/vnd.oci.image.config.v1+json", nil),
		"layers": []any{l.descriptor("application/vnd.oci.image.layer.v1.tar", nil)},
	})
	m := newBlob(manifest)
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{m.descriptor("application/vnd.oci.image.manifest.v1+json",
			map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref})},
	})
	docker, _ := json.Marshal([]map[string]any{{"Config": c.path(), "RepoTags": []string{ref}, "Layers": []string{l.path()}}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index}, {"manifest.json", docker},
		{l.path(), l.data}, {c.path(), c.data}, {m.path(), m.data},
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
