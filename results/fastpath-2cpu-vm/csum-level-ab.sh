#!/bin/bash
# Two falcon-lab builds alternated round by round, each run a paired
# vanilla/auto bench of UDP stress 16 B and 1400 B on docker. Build them first, e.g.
#   git stash; go build -o /var/tmp/falcon-lab-old ./cmd/falcon-lab; git stash pop
#   go build -o /var/tmp/falcon-lab-new ./cmd/falcon-lab
# Results: /var/tmp/ab-{old,new}-ROUND.json (csum-level-ab.txt summarises them).
cd "$(git rev-parse --show-toplevel)" || exit 1
for r in 1 2 3 4; do
	if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
	for b in $order; do
		/var/tmp/falcon-lab-$b bench --layouts docker --modes vanilla,auto --workloads udp-stress:16,udp-stress:1400 \
			--runs 2 --interleave --duration 5s --max-steal 5 --quiet --json /var/tmp/ab-$b-$r.json \
			>/dev/null 2>&1 || echo "fail $b $r"
	done
done
