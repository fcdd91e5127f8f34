#!/usr/bin/env bash
# nginx's tail with the server's CPU saturated or not: vanilla and a mode
# (agents as users run them, `falcon enable` on both hosts) alternated,
# wrk as WRKARGS (default -c4: a closed loop that runs both CPUs flat out;
# "-c32 -s results/scorecard-2cpu-vm/web-think.lua": each connection waits
# 1 ms between requests, so both CPUs keep about half their time idle).
# Around each wrk run it reads what the kernel counts: RPS interrupts and
# NET_RX per request and CPU, ksoftirqd/0's runs and their wait, the nginx
# worker's context switches, each CPU's idle ticks. Prints one line a run;
# web-load-sum.py turns them into ratios. Needs `make build`.
# usage: [ROUNDS=6] [MODE=auto] [WRKARGS=...] web-load-ab.sh   (as root)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
B=./bin/falcon-lab F=./bin/falcon name=wl$$ mode=${MODE:-auto}
d=$(mktemp -d /tmp/falcon-web.XXXX)
off(){ for h in $h1 $h2; do $F disable --netns $h >/dev/null 2>&1 || true; done; }
cleanup(){ [ -f $d/nginx.pid ] && kill $(cat $d/nginx.pid) 2>/dev/null; sleep 0.3; off; $B testbed down --name $name >/dev/null 2>&1 || true; rm -rf $d; }
trap cleanup EXIT
. results/scorecard-2cpu-vm/web-bed.sh
sleep 0.5
ngw=$(pgrep -f "nginx: worker" | head -1) ks0=$(pgrep -x ksoftirqd/0)
snap(){ # one line of name=value counters
	awk '{printf "rps%d=0x%s ", NR-1, $10}' /proc/net/softnet_stat
	awk '/NET_RX/{printf "nrx0=%s nrx1=%s ", $2, $3}' /proc/softirqs
	awk '{printf "ks_wait=%s ks_n=%s ", $2, $3}' /proc/$ks0/schedstat
	awk '{printf "ng_n=%s ", $3}' /proc/$ngw/schedstat
	awk '/^cpu0 /{printf "idle0=%s ", $5} /^cpu1 /{printf "idle1=%s ", $5}' /proc/stat
	echo
}
one(){ # what [mode]
	if [ -n "${2:-}" ]; then for h in $h2 $h1; do $F enable --netns $h --mode $2 >/dev/null; done; sleep 1; fi
	a=$(snap)
	ip netns exec $c1 taskset -c 0 wrk -t1 ${WRKARGS:--c4} -d5s --latency http://$dst:8080/f > $d/wrk.out
	b=$(snap)
	lat=$(awk '/ 50%/{a=$2} / 90%/{b=$2} / 99%/{c=$2} /Requests\/sec/{r=$2} END{print a, b, c, r}' $d/wrk.out)
	python3 - "$1" "$lat" "$a" "$b" <<'PY'
import sys
w, lat, a, b = sys.argv[1:]
A, B = (dict(kv.split('=') for kv in s.split()) for s in (a, b))
D = {k: int(B[k], 0) - int(A[k], 0) for k in A}
req = float(lat.split()[3]) * 5
print(w, lat, 'rps_ipi/req %.2f %.2f' % (D['rps0'] / req, D['rps1'] / req), 'net_rx/req %.2f %.2f' % (D['nrx0'] / req, D['nrx1'] / req),
      'ksoftirqd0 %d wait_ms %.1f' % (D['ks_n'], D['ks_wait'] / 1e6), 'nginx_switches %d' % D['ng_n'],
      'idle_pct %d %d' % (D['idle0'] / 5, D['idle1'] / 5), flush=True)
PY
	off
}
for r in $(seq 1 "${ROUNDS:-6}"); do one vanilla; one "$mode" "$mode"; done
