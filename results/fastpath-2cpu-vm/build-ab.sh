#!/bin/bash
# Two falcon-lab builds alternated round by round (the old first in odd
# rounds), each round a paired bench of MODES on WORKLOADS on docker, RUNS
# interleaved runs of 5 s, --max-steal 5. Build them first, e.g.
#   git stash; go build -o /var/tmp/falcon-lab-old ./cmd/falcon-lab; git stash pop
#   go build -o /var/tmp/falcon-lab-new ./cmd/falcon-lab
# Usage: build-ab.sh [ROUNDS] [MODES] [WORKLOADS] [TAG] [RUNS]
# Results: /var/tmp/TAG-{old,new}-ROUND.json (build-ab-ratios.py reads them).
rounds=${1:-4} modes=${2:-vanilla,auto} workloads=${3:-udp-stress:16} tag=${4:-ab} runs=${5:-2}
cd "$(git rev-parse --show-toplevel)" || exit 1
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
	for b in $order; do
		/var/tmp/falcon-lab-$b bench --layouts docker --modes "$modes" --workloads "$workloads" \
			--runs "$runs" --interleave --duration 5s --max-steal 5 --quiet --json "/var/tmp/$tag-$b-$r.json" \
			>/dev/null 2>&1 || echo "fail $b $r"
	done
done
