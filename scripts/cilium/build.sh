#!/usr/bin/env bash
# Builds what the k8s-cilium testbed layout runs besides Kubernetes (which
# scripts/k8s/build.sh builds), once, from the Go module proxy at one pinned
# Cilium release, into a cache outside the checkout keyed by the versions
# (FALCON_CACHE: /var/cache/falcon as root, else ~/.cache/falcon):
# FALCON_CACHE/cilium/<release>-<pins digest>/:
#   bin/cilium-agent    the agent (./daemon)
#   cni/cilium-cni      the CNI plugin the nodes' containerd runs
#   lib/bpf/            the datapath's C source: the agent compiles it at run
#                       time with clang (--lib-dir=lib)
#   crds/               Cilium's CRDs, which the testbed creates
# No operator: cilium-operator-generic cannot be built from the module proxy
# (it needs sigs.k8s.io/mcs-api/controllers v0.5.2, which the proxy does not
# serve: no version listed, 404), and with Kubernetes' IPAM the agents need
# it only to create the CRDs. No cilium-dbg, bugtool, health responder or
# Hubble: the layout runs without them (health checking off; the test asks
# the agents' API). A build whose pins are there already is skipped. falcon
# finds it through the checkout's .cache/cilium/current (or
# FALCON_CILIUM_DIR).
#
# The agent needs clang >= 18.1 at run time (Cilium's
# Documentation/operations/system_requirements.rst); Debian bookworm's
# clang-19 does (scripts/setup.sh --cilium installs it; the testbed puts
# /usr/lib/llvm-19/bin first in the agent's PATH).
# Usage: scripts/cilium/build.sh [--force]
set -euo pipefail

CILIUM=v1.20.2
# The module proxy does not serve the gobgp pseudo-version Cilium pins
# (v4.6.1-0.20260630022313-d6dee8360046: 403, "This module version is not
# available"); v4.7.0 was tagged the same day, 19 hours later.
GOBGP=v4.7.0

root=$(cd "$(dirname "$0")/../.." && pwd)
pins="cilium=$CILIUM gobgp=$GOBGP $(go env GOVERSION)"
# shellcheck source=../lib/cache.sh
. "$root/scripts/lib/cache.sh"
cache_open cilium "$CILIUM-" "${1:-}"
export CGO_ENABLED=0
go=(nice -n 19 go)

# Cilium's go.mod has a replace directive (controller-tools), which go
# install refuses, and a module requiring Cilium would not see; so the
# build runs inside a writable copy of the module, where -mod=mod lets go
# fill in go.sum for the gobgp stand-in. The module has no vendor directory
# (Cilium's Makefile builds with -mod=vendor).
src=$("${go[@]}" mod download -json "github.com/cilium/cilium@$CILIUM" | awk -F'"' '$2 == "Dir" {print $4}')
mod=$dir/build/cilium
cp -r "$src" "$mod"
chmod -R u+w "$mod"
cd "$mod"
"${go[@]}" mod edit -replace "github.com/osrg/gobgp/v4=github.com/osrg/gobgp/v4@$GOBGP"
export GOFLAGS="-mod=mod -trimpath"

# As Cilium's Makefile.defs: osusergo, the version stamped, stripped.
ldflags="-s -w -X github.com/cilium/cilium/pkg/version.ciliumVersion=${CILIUM#v}"
build() { # build OUT PACKAGE
	local t
	t=$(date +%s)
	"${go[@]}" build -tags osusergo -ldflags "$ldflags" -o "$1" "$2" 2>&1 | grep -v '^go: downloading' >&2 || true
	[ -x "$1" ] || { echo "cilium: building $2 failed" >&2; exit 1; }
	echo "cilium: $(basename "$1") built in $(($(date +%s) - t)) s"
}
build "$dir/bin/cilium-agent" ./daemon
build "$dir/cni/cilium-cni" ./plugins/cilium-cni

# The datapath's source as the agent wants it: its lib-dir's bpf/ (the
# image's /var/lib/cilium/bpf), less what Cilium's install-bpf leaves out
# (Makefile.defs: BPF_SRCFILES_IGNORE).
mkdir -p "$dir/lib"
cp -r "$mod/bpf" "$dir/lib/bpf"
(cd "$dir/lib/bpf" && rm -rf tests complexity-tests custom Makefile Makefile.bpf .gitignore)
# The CRDs the operator would create (pkg/k8s/apis/cilium.io/client).
mkdir -p "$dir/crds"
cp "$mod"/pkg/k8s/apis/cilium.io/client/crds/*/*.yaml "$dir/crds/"
chmod -R a-w "$dir/lib" "$dir/crds"

cache_close cilium
