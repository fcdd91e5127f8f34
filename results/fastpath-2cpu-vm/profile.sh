#!/usr/bin/env bash
# Where each mode spends its CPU per delivered datagram: UDP stress at 16 B
# on the docker layout, one run per mode, perf (cpu-clock sampling, both
# CPUs, call graphs) over 5 s in the middle of the run; profile.py turns the
# samples into microseconds per datagram, by CPU and by stage.
#
# Usage (root, from the repository root, falcon-lab built as bin/falcon-lab: make build):
#   [KEEP_PERF=1] results/fastpath-2cpu-vm/profile.sh [OUTDIR] [MODES]
# KEEP_PERF=1 keeps each mode's perf.data beside its stacks, for perf report.
set -euo pipefail
out=${1:-/tmp/fastpath-profile}
modes=${2:-host/vanilla docker/vanilla docker/fastpath}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for lm in $modes; do
	layout=${lm%/*} mode=${lm#*/} tag=${lm//\//-}
	bin/falcon-lab bench --layouts "$layout" --modes "$mode" --workloads udp-stress --sizes 16 \
		--runs 1 --duration 14s --warmup 1s --quiet --json "$out/$tag.json" &
	bench=$!
	sleep 8
	perf record -q -e cpu-clock -a -g -o "$out/$tag.perf" sleep 5 >/dev/null 2>&1
	wait $bench
	perf script -i "$out/$tag.perf" -F comm,cpu,ip,sym 2>/dev/null | gzip >"$out/$tag.stacks.gz"
	[ "${KEEP_PERF:-0}" = 1 ] || rm -f "$out/$tag.perf"
done
python3 "$here/profile.py" "$out" $modes
