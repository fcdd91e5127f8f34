#!/bin/bash
# Interleaved: the fast path at 89ca729 (before issue 41's work) and now, UDP stress 16 B on docker.
cd /work/main
for i in 6 7 8 9 10; do
  /var/tmp/old/bin/falcon bench --layouts docker --modes vanilla,fastpath --workloads udp-stress:16 --runs 1 --duration 5s --json /var/tmp/b41/old-$i.json >/var/tmp/b41/old-$i.log 2>&1
  ./bin/falcon-lab bench --layouts docker --modes vanilla,fastpath --workloads udp-stress:16 --runs 1 --duration 5s --json /var/tmp/b41/new-$i.json >/var/tmp/b41/new-$i.log 2>&1
done
