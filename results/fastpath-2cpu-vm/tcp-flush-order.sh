#!/usr/bin/env bash
# One TCP flow on the fast path while both hosts' caches are flushed every
# 100 ms (a route added and removed: a real rtnetlink announcement), with
# `ct state invalid counter drop` in both hosts' forward chains: the order
# check at the server's device (falcon-lab trace --seq, the bench's
# --order-check), the receiver's TCP counters and the INVALID drops.
# MODE=vanilla runs the same without falcon: the kernel's own order under
# the same load and flushes, the baseline. FLUSH=0 runs without flushes.
# ACKS=pinned sets RPS on h1's NIC to CPU 0, the client's: otherwise TCP
# also sends from the CPU where h1 processes ACKs, and the sending host
# reorders the flow before it reaches h2 (the kernel's own race, which any
# path between the hosts inherits; internal/agent's order tests pin so).
# SENDER_RPS=MASK sets RPS on the client container's host-side veth instead:
# every segment of the flow, whichever CPU sent it, then waits on the one
# backlog the flow's hash picks, in the order it was sent.
# WIRE_QDISC=pfifo gives both hosts' wires that qdisc (the testbed's are
# veths without one): veth then stops its queue when the peer's ring is
# full instead of dropping, as a NIC's driver does.
# usage: [MODE=vanilla] tcp-flush-order.sh LAYOUT [SECONDS]   (as root, from the repository)
set -euo pipefail
layout=${1:?layout}
secs=${2:-20}
mode=${MODE:-fastpath}
name=tfo$$
B=./bin/falcon-lab F=./bin/falcon
tmp=$(mktemp -d)
cleanup() {
	rm -rf "$tmp"
	[ -z "${flusher:-}" ] || kill "$flusher" 2>/dev/null || true
	$F disable --netns "fb-$name-h1" >/dev/null 2>&1 || true
	$F disable --netns "fb-$name-h2" >/dev/null 2>&1 || true
	$B testbed down --name "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
$B testbed up --layout "$layout" --name "$name" --containers 1 >/dev/null
h1=fb-$name-h1 h2=fb-$name-h2 c1=fb-$name-h1-c0 c2=fb-$name-h2-c0
if [ "${ACKS:-}" = pinned ]; then
	nic=$(ip -n "$h1" -o link show | awk -F': ' '$2 ~ /^eth0/ {print $2}' | cut -d@ -f1)
	ip netns exec "$h1" sh -c "echo 1 >/sys/class/net/$nic/queues/rx-0/rps_cpus"
fi
if [ -n "${SENDER_RPS:-}" ]; then
	peer=$(ip -n "$c1" -o link show eth0 | sed -n 's/.*eth0@if\([0-9]*\).*/\1/p')
	veth=$(ip -n "$h1" -o link show | awk -F': ' -v i="$peer" '$1 == i {print $2}' | cut -d@ -f1)
	ip netns exec "$h1" sh -c "echo $SENDER_RPS >/sys/class/net/$veth/queues/rx-0/rps_cpus"
fi
wires=()
for h in $h1 $h2; do
	w=$(ip -n "$h" -o link show | awk -F': ' '$2 ~ /^eth0/ {print $2}' | cut -d@ -f1)
	wires+=("$h:$w")
	[ -z "${WIRE_QDISC:-}" ] || ip netns exec "$h" tc qdisc replace dev "$w" root $WIRE_QDISC
done
dst=$(ip -n "$c2" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
for h in $h1 $h2; do
	ip netns exec "$h" nft add table inet tfo
	ip netns exec "$h" nft add chain inet tfo chk '{ type filter hook forward priority -10 ; }'
	ip netns exec "$h" nft add rule inet tfo chk ct state invalid counter drop
	[ "$mode" = vanilla ] || $F enable --netns "$h" --mode "$mode" >/dev/null
done
if [ "${FLUSH:-1}" != 0 ]; then
	(while :; do for h in $h1 $h2; do
		ip -n "$h" route add blackhole 198.51.100.0/24; ip -n "$h" route del blackhole 198.51.100.0/24
	done; sleep 0.1; done) &
	flusher=$!
fi
ip netns exec "$c2" nstat -n >/dev/null
ip netns exec "$c1" nstat -n >/dev/null
ip netns exec "$c2" taskset -c 1 iperf3 -s -D -1
sleep 0.5
ip netns exec "$c1" taskset -c 0 iperf3 -c "$dst" -t $((secs + 2)) -J >$tmp/iperf3.json &
client=$!
sleep 1
$B trace --duration "${secs}s" --netns "$c2" --proto tcp --seq "$c2/eth0" --json >$tmp/trace.json
wait $client
if [ -n "${flusher:-}" ]; then kill "$flusher"; wait "$flusher" 2>/dev/null || true; fi
python3 - "$layout" $tmp/iperf3.json $tmp/trace.json "$mode" "${ACKS:+ (ACKs $ACKS)}${SENDER_RPS:+ (sender veth RPS $SENDER_RPS)}${WIRE_QDISC:+ (wire qdisc $WIRE_QDISC)}" <<'EOF'
import json, sys
layout, ip, tr = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
o = tr["order"][0] if tr["order"] else {}
print(f"{layout} {sys.argv[4]}{sys.argv[5]}: {ip['end']['sum_received']['bits_per_second']/1e9:.2f} Gbit/s, order check: {o.get('seen', 0)} segments, {o.get('reordered', 0)} reordered")
EOF
for h in $h1 $h2; do
	echo "$h INVALID drops: $(ip netns exec "$h" nft list chain inet tfo chk | grep -o 'packets [0-9]*')"
	[ "$mode" = vanilla ] || $F status --netns "$h" --json | python3 -c "import json,sys; f=json.load(sys.stdin)['fastpath']; c=f['counters']; print('  invalidations', f['invalidations'], 'ingress hits', c.get('ingress_hit',0), 'egress hits', c.get('egress_hit',0), 'sent moved home', c.get('send_moved',0))"
done
for hw in "${wires[@]}"; do
	echo "${hw%%:*} wire: tx_dropped $(ip netns exec "${hw%%:*}" cat "/sys/class/net/${hw#*:}/statistics/tx_dropped"), qdisc requeues $(ip netns exec "${hw%%:*}" tc -s qdisc show dev "${hw#*:}" | grep -o 'requeues [0-9]*' | head -1 | cut -d' ' -f2)"
done
echo "sender: $(ip netns exec "$c1" nstat | grep -E 'TcpRetransSegs|TcpOutSegs|Loss|Fast|Spurious|DSACK|SACKReorder|Timeouts|Recovery|Reorder' | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ')"
echo "receiver: $(ip netns exec "$c2" nstat | grep -E 'TcpInSegs|TCPOFOQueue|TcpRetransSegs' | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ')"
