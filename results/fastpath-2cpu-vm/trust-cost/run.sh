#!/bin/bash
# Interleaved rounds FIRST..LAST: the fast path at 89ca729 (before issue 41's
# work; its falcon binary built at /var/tmp/old/bin/falcon) and now
# (./bin/falcon-lab), UDP stress 16 B on docker, each beside its own vanilla.
# usage: run.sh FIRST LAST   (as root, from the repository; sum.py reads the files)
set -euo pipefail
here=$(dirname "$0")
for i in $(seq "$1" "$2"); do
  /var/tmp/old/bin/falcon bench --layouts docker --modes vanilla,fastpath --workloads udp-stress:16 --runs 1 --duration 5s --json "$here/old-$i.json" >/dev/null 2>&1
  ./bin/falcon-lab bench --layouts docker --modes vanilla,fastpath --workloads udp-stress:16 --runs 1 --duration 5s --json "$here/new-$i.json" >/dev/null 2>&1
  echo "round $i done"
done
