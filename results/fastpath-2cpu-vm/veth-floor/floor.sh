#!/usr/bin/env bash
# The floor under any veth datapath on this machine: sockperf ping-pong
# (UDP, TCP) and one iperf3 TCP flow, client on CPU 0 and server on CPU 1,
# in interleaved rounds on one docker testbed, between
#   host            the testbed's hosts themselves
#   vanilla         the overlay's containers
#   fastpath        the same, with falcon --mode fastpath on both hosts
#   fastpath-norps  the same without sender-rps
#   floor           a second pair of containers whose packets only get a new
#                   Ethernet header and a redirect (floor.go: no cache, no
#                   checks, no order)
#   floor-rps       the floor with RPS on its host-side veths to the CPU of
#                   the application behind them (where sender-rps puts data)
#   floor-vxlan     the floor in the overlay's VXLAN headers (floor.go -vxlan:
#                   the least an overlay's fast path can do)
#   floor-vxlan-c   the same between the overlay's own containers (their
#                   namespaces, veths and settings as the fast path finds them)
#   floor-1500      the floor at the wire's MTU (the host network's segments)
# The floor's containers get the overlay's MTU (FLOOR_MTU, 1450 as the
# testbed's). FALCON_LAB names another falcon-lab build (a testbed variant).
# WORKLOADS: udp-pp tcp-pp tcp (the default) and memcached (memcaslap, 40
# connections in 4 threads, 550 B values, 4 server threads: the bench's --flows 4).
# Output: "ROUND MODE WORKLOAD VALUES" lines for floor-ratios.py.
# usage: [MODES=...] [WORKLOADS=...] [FLOOR_MTU=N] [FALCON_LAB=PATH] floor.sh [ROUNDS] [SECONDS]
#   (as root, from the repository, after make build)
set -uo pipefail
rounds=${1:-6} secs=${2:-5}
modes=${MODES:-host vanilla fastpath floor} workloads=${WORKLOADS:-udp-pp tcp-pp tcp}
B=${FALCON_LAB:-./bin/falcon-lab} F=./bin/falcon name=vf$$ mtu=${FLOOR_MTU:-1450}
tmp=$(mktemp -d)
h1=fb-$name-h1 h2=fb-$name-h2 c1=fb-$name-h1-c0 c2=fb-$name-h2-c0 f1=fl-$name-1 f2=fl-$name-2
cleanup() {
	[ -z "${fp:-}" ] || { kill "$fp" 2>/dev/null; wait "$fp" 2>/dev/null; }
	for h in $h1 $h2; do $F disable --netns "$h" >/dev/null 2>&1; done
	for n in $f1 $f2; do # a server left by an interrupted run
		ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns del "$n" 2>/dev/null
	done
	$B testbed down --name "$name" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
go build -o "$tmp/floor" results/fastpath-2cpu-vm/veth-floor/floor.go || exit 1
$B testbed up --layout docker --name "$name" --containers 1 >/dev/null || exit 1
i=1
for p in "$h1 $f1" "$h2 $f2"; do
	set -- $p
	ip netns add "$2"
	ip -n "$1" link add fl0 mtu "$mtu" type veth peer name eth0 netns "$2"
	ip -n "$2" link set eth0 mtu "$mtu"
	ip -n "$1" addr add 10.250.$i.1/24 dev fl0
	ip -n "$1" link set fl0 up
	ip -n "$2" addr add 10.250.$i.2/24 dev eth0
	ip -n "$2" link set lo up
	ip -n "$2" link set eth0 up
	ip -n "$2" route add default via 10.250.$i.1
	i=$((i + 1))
done
vx=$(ip -n "$h1" -d -j link show type vxlan | python3 -c "import json,sys; d=json.load(sys.stdin)[0]['linkinfo']['info_data']; print('%d:%d' % (d['port'], d['id']))")
floor() { # on CONT_A CONT_B [FLAGS] | off
	if [ "$1" = off ]; then kill "$fp"; wait "$fp" 2>/dev/null; fp=; return; fi
	local a=$2 b=$3
	shift 3
	"$tmp/floor" "$@" "$h1" "$a" "$h2" "$b" >/dev/null & fp=$!
	sleep 0.5
	kill -0 "$fp" || exit 1
}
addr() { ip -n "$1" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1; }
declare -A cli srv
cli[host]=$h1 srv[host]=$h2 cli[vanilla]=$c1 srv[vanilla]=$c2 cli[floor]=$f1 srv[floor]=$f2
cli[fastpath]=$c1 srv[fastpath]=$c2 cli[fastpath-norps]=$c1 srv[fastpath-norps]=$c2 cli[floor-rps]=$f1 srv[floor-rps]=$f2
cli[floor-vxlan]=$f1 srv[floor-vxlan]=$f2 cli[floor-vxlan-c]=$c1 srv[floor-vxlan-c]=$c2 cli[floor-1500]=$f1 srv[floor-1500]=$f2
setup() { # MODE on|off
	case $1 in
	fastpath | fastpath-norps)
		local m=fastpath
		[ "$1" = fastpath ] || m=fastpath:sender-rps=false
		for h in $h1 $h2; do
			if [ "$2" = on ]; then $F enable --netns "$h" --mode "$m" >/dev/null || exit 1
			else $F disable --netns "$h" >/dev/null; fi
		done ;;
	floor) floor "$2" "$f1" "$f2" ;;
	floor-vxlan) floor "$2" "$f1" "$f2" -vxlan "$vx" ;;
	floor-vxlan-c) floor "$2" "$c1" "$c2" -vxlan "$vx" ;;
	floor-1500)
		floor "$2" "$f1" "$f2"
		local m=1500
		[ "$2" = on ] || m=$mtu
		for p in "$h1 $f1" "$h2 $f2"; do
			set -- $p
			ip -n "$1" link set fl0 mtu $m
			ip -n "$2" link set eth0 mtu $m
		done ;;
	floor-rps) # the client's data leaves from CPU 0, the server's from CPU 1
		floor "$2" "$f1" "$f2"
		local a=1 b=2
		[ "$2" = on ] || a=0 b=0
		ip netns exec "$h1" sh -c "echo $a > /sys/class/net/fl0/queues/rx-0/rps_cpus"
		ip netns exec "$h2" sh -c "echo $b > /sys/class/net/fl0/queues/rx-0/rps_cpus" ;;
	esac
}
pp() { # CLIENT SERVER_NS ADDR [--tcp]
	ip netns exec "$2" taskset -c 1 sockperf server -i "$3" -p 11111 ${4:-} >/dev/null 2>&1 & local s=$!
	sleep 0.5
	ip netns exec "$1" taskset -c 0 sockperf ping-pong -i "$3" -p 11111 -t "$secs" -m 16 ${4:-} 2>&1 |
		python3 -c '
import re,sys
t=sys.stdin.read()
v=re.search(r"RunTime=([0-9.]+) sec; SentMessages=([0-9]+); ReceivedMessages=([0-9]+)",t)
p=dict(re.findall(r"percentile ([0-9.]+) =\s*([0-9.]+)",t))
print("%.0f %s %s"%(int(v.group(3))/float(v.group(1)),p["50.000"],p["99.000"]))'
	kill $s; wait $s 2>/dev/null
}
bulk() { # CLIENT SERVER_NS ADDR
	ip netns exec "$2" taskset -c 1 iperf3 -s -D -1 -p 5299
	sleep 0.3
	ip netns exec "$1" taskset -c 0 iperf3 -c "$3" -p 5299 -t "$secs" -J |
		python3 -c "import json,sys; print(round(json.load(sys.stdin)['end']['sum_received']['bits_per_second']/1e9, 3))"
}
mc() { # CLIENT SERVER_NS ADDR: operations/s
	ip netns exec "$2" taskset -c 1 memcached -u root -l "$3" -p 11211 -U 0 -t 4 -m 256 -c 4096 >/dev/null 2>&1 & local s=$!
	sleep 0.5
	ip netns exec "$1" taskset -c 0 memcaslap -s "$3:11211" -c 40 -T 4 -t "${secs}s" -S "${secs}s" -X 550 2>&1 |
		sed -n 's/.*Run time: [0-9.]*s Ops: [0-9]* TPS: \([0-9]*\).*/\1/p' | tail -1
	kill $s; wait $s 2>/dev/null
}
for r in $(seq "$rounds"); do
	for m in $modes; do
		setup "$m" on
		a=$(addr "${srv[$m]}")
		for w in $workloads; do
			case $w in
			udp-pp) echo "$r $m $w $(pp "${cli[$m]}" "${srv[$m]}" "$a")" ;;
			tcp-pp) echo "$r $m $w $(pp "${cli[$m]}" "${srv[$m]}" "$a" --tcp)" ;;
			tcp) echo "$r $m $w $(bulk "${cli[$m]}" "${srv[$m]}" "$a")" ;;
			memcached) echo "$r $m $w $(mc "${cli[$m]}" "${srv[$m]}" "$a")" ;;
			esac
		done
		setup "$m" off
	done
done
