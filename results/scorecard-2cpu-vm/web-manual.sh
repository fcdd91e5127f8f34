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
$B testbed up --layout docker --name $name --containers 1 >/dev/null
h1=fb-$name-h1 h2=fb-$name-h2 c1=fb-$name-h1-c0 c2=fb-$name-h2-c0
nic=$(ip -n $h1 -o link show | awk -F': ' '$2 ~ /^eth0/ {print $2}' | cut -d@ -f1)
[ "${PIN:-1}" = 0 ] || ip netns exec $h1 sh -c "echo 1 >/sys/class/net/$nic/queues/rx-0/rps_cpus"
dst=$(ip -n $c2 -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
mkdir -p $d/www; head -c 1024 /dev/urandom > $d/www/f
cat > $d/nginx.conf <<C
daemon on; master_process on; user root; worker_processes 1; pid $d/nginx.pid; error_log stderr warn;
events { worker_connections 4096; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000; default_type application/octet-stream;
client_body_temp_path $d/cb; proxy_temp_path $d/px; fastcgi_temp_path $d/fc; uwsgi_temp_path $d/uw; scgi_temp_path $d/sc;
server { listen $dst:8080; root $d/www; } }
C
[ "$mode" = vanilla ] || $F enable --netns $h2 --mode $mode >/dev/null
ip netns exec $c2 taskset -c 1 nginx -p $d/ -c $d/nginx.conf -e stderr
sleep 0.5
ip netns exec $c1 taskset -c 0 wrk -t1 -c${CONNS:-8} -d${SECS:-6}s --latency http://$dst:8080/f | grep -E "Requests/sec|50%|90%|99%"
[ "$mode" = vanilla ] || $F status --netns $h2 ${STATUS_ARGS:-}
