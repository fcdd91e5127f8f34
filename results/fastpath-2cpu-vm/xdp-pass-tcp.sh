#!/usr/bin/env bash
# What XDP alone costs one TCP flow on the testbed's NIC (the veth wire):
# an XDP program that passes everything (xdp-pass.go) on the receiving
# host's eth0, with and without the fast path, in interleaved rounds of
# 8 s (client on CPU 0, server on CPU 1). An XDP decapsulation before GRO
# can do no better than its XDP_PASS row, less its own per-packet work.
# usage: xdp-pass-tcp.sh LAYOUT [ROUNDS]   (as root, from the repository)
set -uo pipefail
layout=${1:?layout}
rounds=${2:-3}
B=./bin/falcon-lab F=./bin/falcon name=xpt$$
tmp=$(mktemp -d)
h1=fb-$name-h1 h2=fb-$name-h2 c1=fb-$name-h1-c0 c2=fb-$name-h2-c0
cleanup() {
	[ -z "${xp:-}" ] || kill "$xp" 2>/dev/null
	$F disable --netns "$h1" >/dev/null 2>&1
	$F disable --netns "$h2" >/dev/null 2>&1
	$B testbed down --name "$name" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
go build -o "$tmp/xdp-pass" results/fastpath-2cpu-vm/xdp-pass.go || exit 1
$B testbed up --layout "$layout" --name "$name" --containers 1 >/dev/null || exit 1
nic=$(ip -n "$h2" -o link show | awk -F': ' '$2 ~ /^eth0/ {print $2}' | cut -d@ -f1)
dst=$(ip -n "$c2" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
run() { # MODE XDP
	xp=
	[ "$1" = vanilla ] || for h in $h1 $h2; do $F enable --netns "$h" --mode "$1" >/dev/null; done
	if [ "$2" = xdp-pass ]; then "$tmp/xdp-pass" "$h2" "$nic" >/dev/null & xp=$!; sleep 0.5; fi
	ip netns exec "$c2" taskset -c 1 iperf3 -s -D -1
	sleep 0.3
	gbps=$(ip netns exec "$c1" taskset -c 0 iperf3 -c "$dst" -t 8 -J |
		python3 -c "import json,sys; print(round(json.load(sys.stdin)['end']['sum_received']['bits_per_second']/1e9, 2))")
	tso=$(ip netns exec "$h1" ethtool -k eth0 | awk '/^tcp-segmentation-offload/ {print $2}')
	echo "$layout $1 $2: $gbps Gbit/s (TSO on the sending end of the wire: $tso)"
	if [ -n "$xp" ]; then kill "$xp"; wait "$xp" 2>/dev/null; xp=; fi
	[ "$1" = vanilla ] || for h in $h1 $h2; do $F disable --netns "$h" >/dev/null; done
}
for _ in $(seq "$rounds"); do
	for m in "vanilla none" "vanilla xdp-pass" "fastpath none" "fastpath xdp-pass"; do run $m; done
done
