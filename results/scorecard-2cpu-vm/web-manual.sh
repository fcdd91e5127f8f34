#!/usr/bin/env bash
# nginx + wrk on a docker testbed with falcon as users run it (`falcon enable`,
# its agent a process of its own), not the bench's in-process agent: one
# nginx worker on CPU 1, wrk (one thread, CONNS connections, SECS seconds) on
# CPU 0, the sending host's wire RPS'd to CPU 0 as the bench does (PIN=0: not).
# Prints wrk's p50/p90/p99 and requests/s, and falcon status after the run.
# usage: [MODE=vanilla|fastpath|auto] [CONNS=8] [SECS=6] [PIN=0] web-manual.sh  (as root)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
B=./bin/falcon-lab F=./bin/falcon
name=wb$$ mode=${MODE:-fastpath}
d=$(mktemp -d /tmp/falcon-web.XXXX)
cleanup(){ [ -f $d/nginx.pid ] && kill $(cat $d/nginx.pid) 2>/dev/null; sleep 0.3; $F disable --netns fb-$name-h2 >/dev/null 2>&1 || true; $B testbed down --name $name >/dev/null 2>&1 || true; rm -rf $d; }
trap cleanup EXIT
. results/scorecard-2cpu-vm/web-bed.sh
[ "$mode" = vanilla ] || $F enable --netns $h2 --mode $mode >/dev/null
sleep 0.5
ip netns exec $c1 taskset -c 0 wrk -t1 -c${CONNS:-8} -d${SECS:-6}s --latency http://$dst:8080/f | grep -E "Requests/sec|50%|90%|99%"
[ "$mode" = vanilla ] || $F status --netns $h2 ${STATUS_ARGS:-}
