#!/usr/bin/env bash
# One TCP flow into a container that forwards, as every container of a
# host that forwards does: vanilla, and two falcon builds' default (agents
# as users run them, `falcon enable` on both hosts), alternated round by
# round on one docker testbed whose containers forward (lab/testbed sets
# it). iperf3, client on CPU 0, server on CPU 1, 8 s. Prints per run:
# what, Gbit/s, then the receiving host's fast path counters over the run
# (ingress hits, not_eligible: what took the slow path as ineligible,
# aggregates to a container that may forward them among them).
# Build the two first (/var/tmp/falcon-old, /var/tmp/falcon-new).
# usage: [ROUNDS=5] ab.sh   (as root)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
B=./bin/falcon-lab name=fw$$
h1=fb-$name-h1 h2=fb-$name-h2 c1=fb-$name-h1-c0 c2=fb-$name-h2-c0
off(){ for b in old new; do for h in $h1 $h2; do /var/tmp/falcon-$b disable --netns $h >/dev/null 2>&1 || true; done; done; }
cleanup(){ pkill -f "iperf3 -s -1 -p 5299" 2>/dev/null || true; off; $B testbed down --name $name >/dev/null 2>&1 || true; }
trap cleanup EXIT
$B testbed up --layout docker --name $name --containers 1 >/dev/null
echo "# containers forward: $(ip netns exec $c2 cat /proc/sys/net/ipv4/conf/all/forwarding)"
dst=$(ip -n $c2 -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
counters(){ # the receiving host's ingress_hit and not_eligible, or "- -"
	$1 status --netns $h2 --json 2>/dev/null | python3 -c '
import json, sys
c = ((json.load(sys.stdin).get("fastpath") or {}).get("counters") or {})
print(c.get("ingress_hit", "-"), c.get("not_eligible", "-"))' 2>/dev/null || echo "- -"
}
one(){ # what [build]
	local f=/var/tmp/falcon-${2:-new}
	if [ -n "${2:-}" ]; then for h in $h2 $h1; do $f enable --netns $h >/dev/null; done; sleep 1; fi
	read -r h0 n0 < <(counters $f)
	ip netns exec $c2 taskset -c 1 iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
	sleep 0.3
	g=$(ip netns exec $c1 taskset -c 0 iperf3 -c $dst -p 5299 -t 8 -J | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))')
	wait
	read -r h1_ n1 < <(counters $f)
	if [ "$h0" = - ] || [ "$h1_" = - ]; then echo "$1 $g"; else echo "$1 $g hits $((h1_ - h0)) not_eligible $((n1 - n0))"; fi
	off
}
for r in $(seq 1 "${ROUNDS:-5}"); do one vanilla; one old old; one new new; done
