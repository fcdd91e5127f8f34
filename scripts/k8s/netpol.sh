#!/usr/bin/env bash
# Builds the NetworkPolicy engine the k8s testbed layout runs with
# --netpol, once, from the Go module proxy at a pinned release, into the
# cache scripts/k8s/build.sh uses (FALCON_CACHE: /var/cache/falcon as
# root, else ~/.cache/falcon): FALCON_CACHE/netpol/<release>-<pins digest>/:
#   bin/kube-network-policies  sigs.k8s.io/kube-network-policies/cmd at KNP
#                              (nftables rules; a connection's first packets
#                              judged in user space through nfqueue)
#   rbac.yaml                  the release's install.yaml up to its DaemonSet:
#                              its ClusterRole, binding and ServiceAccount
# A build whose pins are there already is skipped. falcon finds it through
# the checkout's .cache/netpol/current (or FALCON_NETPOL_DIR). A cache of
# its own, not a pin of build.sh's: adding it there would rebuild
# Kubernetes.
# Usage: scripts/k8s/netpol.sh [--force]
set -euo pipefail

KNP=v0.8.0

root=$(cd "$(dirname "$0")/../.." && pwd)
pins="knp=$KNP $(go env GOVERSION)"
# shellcheck source=../lib/cache.sh
. "$root/scripts/lib/cache.sh"
cache_open netpol "$KNP-" "${1:-}"
export CGO_ENABLED=0 GOFLAGS=-trimpath
go=(nice -n 19 go)

# Its go.mod has no replace directives, so go install builds it at its own
# pins; the package is named cmd, hence the rename.
GOBIN=$dir/build "${go[@]}" install -ldflags "-s -w" "sigs.k8s.io/kube-network-policies/cmd@$KNP"
mv "$dir/build/cmd" "$dir/bin/kube-network-policies"
src=$("${go[@]}" env GOMODCACHE)/sigs.k8s.io/kube-network-policies@$KNP
# Every document of install.yaml but the DaemonSet, whose image no
# registry here serves: the testbed runs the binary on each node itself.
awk 'function flush() { if (doc != "" && doc !~ /\nkind: DaemonSet\n/) printf "---%s\n", doc; doc = "" }
	/^---$/ { flush(); next } { doc = doc "\n" $0 } END { flush() }' "$src/install.yaml" >"$dir/rbac.yaml"
for k in ClusterRole ClusterRoleBinding ServiceAccount; do
	grep -q "^kind: $k\$" "$dir/rbac.yaml" || { echo "netpol: no $k in $src/install.yaml" >&2; exit 1; }
done

cache_close netpol
