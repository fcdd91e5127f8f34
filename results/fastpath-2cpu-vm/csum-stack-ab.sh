#!/bin/bash
# The outer checksum's A/B (csum-stack-ab.txt): two falcon-lab builds
# alternated round by round, each run a paired vanilla/auto bench of UDP
# stress 16 B on docker (build-ab.sh says how to build them).
# Results: /var/tmp/ab-{old,new}-ROUND.json.
exec "$(dirname "$0")/build-ab.sh" 4 vanilla,auto udp-stress:16 ab 2
