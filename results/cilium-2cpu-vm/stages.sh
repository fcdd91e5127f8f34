#!/bin/bash
# Where each receiving host's softirq time goes, per stage (--stage-cost):
# Flannel vanilla and with the fast path, and Cilium, for UDP stress at
# 16 B, one TCP flow and TCP ping-pong; 2 interleaved rounds of 3 s.
# usage: stages.sh   (as root, from the repository; stages.py reads the files)
set -euo pipefail
here=$(dirname "$0")
w=udp-stress:16,tcp:128K,latency-tcp:16
./bin/falcon-lab bench --layouts k8s --modes vanilla,fastpath --workloads $w --stage-cost --max-steal 5 \
  --interleave --runs 2 --duration 3s --quiet --json "$here/stages-k8s.json" >/dev/null
./bin/falcon-lab bench --layouts k8s-cilium --modes vanilla --workloads $w --stage-cost --max-steal 5 \
  --runs 2 --duration 3s --quiet --json "$here/stages-k8s-cilium.json" >/dev/null
