#!/usr/bin/env bash
# Two falcon builds' agents as users run them (`falcon enable`, a process
# each, on both hosts as the bench's auto does), alternated with vanilla
# round by round: nginx (one worker, CPU 1) and wrk (one thread, 4
# connections, 5 s, CPU 0) on a docker testbed whose sending host's wire is
# RPS'd to CPU 0, as the bench's. Prints per run: what, p50, p90, p99,
# requests/s. Build the two first, e.g.
#   git stash; go build -o /var/tmp/falcon-old ./cmd/falcon; git stash pop
#   go build -o /var/tmp/falcon-new ./cmd/falcon
# usage: [ROUNDS=8] [MODE=auto] web-agents-ab.sh   (as root)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
B=./bin/falcon-lab name=wa$$ mode=${MODE:-auto}
d=$(mktemp -d /tmp/falcon-web.XXXX)
h1=fb-$name-h1 h2=fb-$name-h2 c1=fb-$name-h1-c0 c2=fb-$name-h2-c0
off(){ for b in old new; do for h in $h1 $h2; do /var/tmp/falcon-$b disable --netns $h >/dev/null 2>&1 || true; done; done; }
cleanup(){ [ -f $d/nginx.pid ] && kill $(cat $d/nginx.pid) 2>/dev/null; sleep 0.3; off; $B testbed down --name $name >/dev/null 2>&1 || true; rm -rf $d; }
trap cleanup EXIT
. results/scorecard-2cpu-vm/web-bed.sh
one(){ # what [build]
	if [ -n "${2:-}" ]; then for h in $h2 $h1; do /var/tmp/falcon-$2 enable --netns $h --mode $mode >/dev/null; done; sleep 1; fi
	ip netns exec $c1 taskset -c 0 wrk -t1 -c4 -d5s --latency http://$dst:8080/f |
		awk -v w="$1" '/ 50%/{a=$2} / 90%/{b=$2} / 99%/{c=$2} /Requests\/sec/{r=$2} END{print w, a, b, c, r}'
	off
}
for r in $(seq 1 "${ROUNDS:-8}"); do one vanilla; one old old; one new new; done
