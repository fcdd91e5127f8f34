#!/usr/bin/env bash
# Builds what the k8s testbed layout runs, once, from the Go module proxy at
# one pinned Kubernetes release, into a cache outside the checkout keyed by
# the versions (FALCON_CACHE: /var/cache/falcon as root, else
# ~/.cache/falcon): FALCON_CACHE/k8s/<release>-<pins digest>/:
#   bin/kube-apiserver kube-controller-manager kube-scheduler kubelet
#       kube-proxy kubectl   k8s.io/kubernetes at K8S (kubectl too: Debian
#                            bookworm's kubernetes-client is 1.20, too far
#                            behind the server)
#   bin/etcd bin/flanneld    scripts/daemons.sh's (the flannel-daemon layout's)
#   cni/bridge host-local flannel   scripts/daemons.sh's
#   cni/loopback portmap     github.com/containernetworking/plugins
# A build whose pins are there already is skipped. falcon finds it through
# the checkout's .cache/k8s/current (or FALCON_K8S_DIR).
#
# The release: v1.34 is the newest whose kubelet still supports containerd
# 1.6/1.7 (Debian bookworm's containerd is 1.6.20); from v1.36 the kubelet
# wants containerd 2.
# Usage: scripts/k8s/build.sh [--force]
set -euo pipefail

K8S=v1.34.4
CNI_PLUGINS=v1.10.0 # as scripts/daemons.sh

root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/scripts/daemons.sh" >/dev/null
daemons=$(readlink -f "$root/.cache/daemons/current")

pins="k8s=$K8S cni=$CNI_PLUGINS daemons=$(basename "$daemons") $(go env GOVERSION)"
# shellcheck source=../lib/cache.sh
. "$root/scripts/lib/cache.sh"
cache_open k8s "$K8S-" "${1:-}"
export CGO_ENABLED=0 GOFLAGS=-trimpath
go=(nice -n 19 go)

# k8s.io/kubernetes replaces its staging modules (k8s.io/api, client-go, ...)
# by directories of its own repository, which go install refuses and a
# requiring module does not see; each is published on the proxy as v0.X.Y
# of the release vX.Y, so a throwaway module requires the release and
# replaces every staging module by that version. Everything else stays at
# the release's own pins (its go.mod lists its whole build list).
mod=$dir/build/kubernetes
mkdir -p "$mod" && cd "$mod"
"${go[@]}" mod download -json "k8s.io/kubernetes@$K8S" >/dev/null
kmod=$("${go[@]}" env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S.mod
cat >go.mod <<EOF
module falcon-k8s

go $(awk '$1 == "go" {print $2; exit}' "$kmod")

godebug default=go$(awk '$1 == "go" {split($2, v, "."); print v[1] "." v[2]; exit}' "$kmod")
EOF
staging=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$kmod")
edits=(-require "k8s.io/kubernetes@$K8S")
for m in $staging; do
	edits+=(-replace "$m=$m@v0.${K8S#v1.}")
done
"${go[@]}" mod edit "${edits[@]}"
cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOF
"${go[@]}" mod tidy -e 2>&1 | grep -v '^go: \(downloading\|finding\|found\)' >&2 || true

# The version the binaries report (kubectl version, the node's kubelet
# version), as hack/lib/version.sh stamps it.
minor=${K8S#v1.} minor=${minor%%.*}
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $p.gitVersion=$K8S -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
for cmd in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl; do
	t=$(date +%s)
	"${go[@]}" build -tags tools -ldflags "$ldflags" -o "$dir/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
	echo "k8s: $cmd built in $(($(date +%s) - t)) s"
done

GOBIN=$dir/cni "${go[@]}" install -ldflags "-s -w" \
	"github.com/containernetworking/plugins/plugins/main/loopback@$CNI_PLUGINS" \
	"github.com/containernetworking/plugins/plugins/meta/portmap@$CNI_PLUGINS"
cp "$daemons"/bin/etcd "$daemons"/bin/flanneld "$dir/bin/"
cp "$daemons"/cni/* "$dir/cni/"

cache_close k8s
