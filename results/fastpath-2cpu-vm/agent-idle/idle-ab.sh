#!/usr/bin/env bash
# An idle agent's wake-ups and CPU: two builds (/var/tmp/falcon-old and
# /var/tmp/falcon-new) enabled in turn on one docker testbed, WINDOW s each
# (default 20), ROUNDS rounds, CONTAINERS containers a host (default 1).
set -eu
cd "${FALCON_REPO:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}"
bin/falcon-lab testbed up --layout docker --name ia --containers ${CONTAINERS:-1} >/dev/null
trap 'for b in old new; do /var/tmp/falcon-$b disable --netns fb-ia-h1 >/dev/null 2>&1; done; bin/falcon-lab testbed down --name ia >/dev/null 2>&1' EXIT
for r in $(seq 1 ${ROUNDS:-3}); do
  for b in old new; do
    /var/tmp/falcon-$b enable --netns fb-ia-h1 >/dev/null
    sleep 5
    pid=$(pgrep -f 'agent .*--netns=fb-ia-h1' | head -1)
    sw() { cat /proc/$pid/task/*/status | awk '/^voluntary_ctxt_switches|^nonvoluntary_ctxt_switches/{s+=$2} END{print s}'; }
    cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
    w=${WINDOW:-20}
    s1=$(sw); c1=$(cpu); sleep $w; s2=$(sw); c2=$(cpu)
    echo "round $r $b: $(( (s2-s1)/w )) context switches/s, $(awk -v t=$((c2 - c1)) -v w=$w 'BEGIN { printf "%.1f", t * 10 / w }') ms CPU/s"
    /var/tmp/falcon-$b disable --netns fb-ia-h1 >/dev/null
  done
done
