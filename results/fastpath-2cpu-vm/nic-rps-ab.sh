#!/usr/bin/env bash
# The receiving host's NIC stage on the receiver's CPU: benches alternated
# without and with RPS of the receiving host's wire (eth0 of every fb-*-h2
# namespace) to CPU 1, the receiving application's. The testbed runs the
# receiving host's NIC poll on the CPU that sends into its wire (CPU 0,
# with the senders); RPS moves everything after that poll's GRO (tc
# ingress, the overlay or the fast path, the socket) to CPU 1. Each
# testbed is removed after its bench, its RPS value with it.
#
# Usage (root, repository root, bin/falcon-lab built):
#   results/fastpath-2cpu-vm/nic-rps-ab.sh OUTDIR [ROUNDS] [WORKLOADS]
set -euo pipefail
out=$1 rounds=${2:-3} workloads=${3:-udp-stress:16,tcp:128K}
mkdir -p "$out"
watch() {
	while :; do
		for ns in $(ip netns list | awk '{print $1}' | grep -E '^fb-.*-h2$' || true); do
			ip netns exec "$ns" sh -c 'f=/sys/class/net/eth0/queues/rx-0/rps_cpus; [ "$(cat $f)" = 2 ] || echo 2 >$f' 2>/dev/null || true
		done
		sleep 0.2
	done
}
bench() {
	bin/falcon-lab bench --layouts docker --modes vanilla,fastpath --workloads "$workloads" \
		--runs 2 --duration 4s --interleave --max-steal 5 --quiet --json "$1" >/dev/null
}
for i in $(seq 1 "$rounds"); do
	bench "$out/off-$i.json"
	watch &
	w=$!
	bench "$out/on-$i.json"
	kill $w
	wait $w 2>/dev/null || true
done
