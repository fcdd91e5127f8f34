#!/usr/bin/env bash
# Builds the real daemons of the flannel-daemon testbed layout, once, from
# the Go module proxy at pinned versions, into a cache outside the checkout
# (FALCON_CACHE: /var/cache/falcon as root, else ~/.cache/falcon), so that
# every clone on the machine shares the build: FALCON_CACHE/daemons/<pins
# digest>/:
#   bin/flanneld  github.com/flannel-io/flannel (the VXLAN backend's daemon)
#   bin/etcd      go.etcd.io/etcd/server/v3 (flanneld's store)
#   cni/bridge, cni/host-local  github.com/containernetworking/plugins
#   cni/flannel   Flannel's CNI plugin (see FLANNEL_CNI below)
# A build whose pins are already there is skipped, so running it again costs
# nothing. falcon finds them through the checkout's .cache/daemons/current,
# a link to that directory (or FALCON_DAEMONS_DIR). scripts/setup.sh
# --daemons (and --test, which make test runs) runs this.
# Usage: scripts/daemons.sh [--force]
set -euo pipefail

FLANNEL=v0.28.10
ETCD=v3.7.3
CNI_PLUGINS=v1.10.0
# The module proxy refuses github.com/flannel-io/cni-plugin; that plugin was
# forked from containernetworking/plugins' plugins/meta/flannel, whose last
# release there is v0.9.1: the same CNI plugin, a few years older.
FLANNEL_CNI=v0.9.1
# Served stand-ins for two of flanneld's pins the proxy refuses (see wrap).
TENCENT_VPC=v1.3.75 TENCENT_COMMON=v1.3.211

root=$(cd "$(dirname "$0")/.." && pwd)
pins="flannel=$FLANNEL etcd=$ETCD cni=$CNI_PLUGINS flannel-cni=$FLANNEL_CNI tencent=$TENCENT_VPC,$TENCENT_COMMON $(go env GOVERSION)"
# shellcheck source=lib/cache.sh
. "$root/scripts/lib/cache.sh"
cache_open daemons "" "${1:-}"
export CGO_ENABLED=0 GOFLAGS=-trimpath
build=(nice -n 10 go)

# Both daemons are built from a throwaway module that requires them, not
# with 'go install module@version': etcd's server module has replace
# directives (its repository's other modules), which go install refuses, and
# two of flanneld's dependencies (the Tencent cloud SDK of its tencentvpc
# backend, unused here) are not served at flanneld's pins, so they are
# replaced by versions that are. Every other module stays at the daemon's own
# pins (its go.mod lists its whole build list, which MVS keeps).
wrap() { # wrap DIR MODULE@VERSION [go mod edit flags...]
	mkdir -p "$1" && cd "$1"
	"${build[@]}" mod init "falcon-daemons-$(basename "$1")" >/dev/null 2>&1
	[ $# -lt 3 ] || "${build[@]}" mod edit "${@:3}"
	"${build[@]}" get "$2" 2>&1 | grep -v '^go: \(downloading\|added\|upgraded\)' >&2 || true
}
tencent=github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud
(
	wrap "$dir/build/flannel" "github.com/flannel-io/flannel@$FLANNEL" \
		-replace "$tencent/vpc=$tencent/vpc@$TENCENT_VPC" -replace "$tencent/common=$tencent/common@$TENCENT_COMMON"
	# cgo: the udp backend (unused here) is C; flannel builds it so too.
	CGO_ENABLED=1 "${build[@]}" build -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL" \
		-o "$dir/bin/flanneld" github.com/flannel-io/flannel
)
(
	wrap "$dir/build/etcd" "go.etcd.io/etcd/server/v3@$ETCD"
	"${build[@]}" build -ldflags "-s -w" -o "$dir/bin/etcd" go.etcd.io/etcd/server/v3
)

GOBIN=$dir/cni "${build[@]}" install -ldflags "-s -w" \
	"github.com/containernetworking/plugins/plugins/main/bridge@$CNI_PLUGINS" \
	"github.com/containernetworking/plugins/plugins/ipam/host-local@$CNI_PLUGINS"
GOBIN=$dir/cni "${build[@]}" install -ldflags "-s -w" \
	"github.com/containernetworking/plugins/plugins/meta/flannel@$FLANNEL_CNI"

cache_close daemons
