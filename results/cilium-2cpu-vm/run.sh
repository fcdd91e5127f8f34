#!/bin/bash
# Interleaved rounds FIRST..LAST of the side by side with Cilium: each round
# runs the host network, the k8s layout (Flannel: vanilla, its A/A twin,
# falcon's default and the fast path, taking turns) and the k8s-cilium layout
# (Cilium, its A/A twin), one run of each case, the layouts' order rotated
# round by round, and the modes' order too, so that drift over the session
# falls on each alike; a run the hypervisor took more than 5 % of a CPU from
# is measured again (--max-steal).
# usage: run.sh FIRST LAST   (as root, from the repository, after
# scripts/setup.sh --cilium and make build; sum.py reads the files)
set -euo pipefail
here=$(dirname "$0")
orders=("host k8s k8s-cilium" "k8s k8s-cilium host" "k8s-cilium host k8s")
modes=(vanilla,vanilla@aa,auto,fastpath fastpath,vanilla,vanilla@aa,auto auto,fastpath,vanilla,vanilla@aa vanilla@aa,auto,fastpath,vanilla)
for i in $(seq "$1" "$2"); do
  for l in ${orders[$((i % 3))]}; do
    ./bin/falcon-lab bench --layouts "$l" --modes "${modes[$((i % 4))]}" --max-steal 5 \
      --workloads udp-stress:16,udp-stress:1400,tcp:128K,multi-flow-tcp:128K,latency-tcp:16,memcached:550,web:1K \
      --flows 8 --interleave --runs 1 --duration 5s --quiet --json "$here/$l-$i.json" >/dev/null ||
      echo "round $i $l: a run failed (its reason is in the file)"
  done
  echo "round $i done $(date -u +%H:%M:%S)"
done
