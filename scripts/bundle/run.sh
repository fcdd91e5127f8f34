#!/bin/sh
# falcon benchmark bundle: checks this machine, then measures it.
#
#   sudo ./run.sh                the scale preset: a receiving host with its
#                                own NIC, application and Falcon CPUs (needs
#                                8 or more CPUs)
#   sudo ./run.sh --quick        a smoke test of about a minute (any machine)
#   sudo ./run.sh --kernel-sender  the scale preset's UDP cases, sent by
#                                falcon's kernel sender instead of iperf3 and
#                                sockperf: the sending side then costs the
#                                receiving host nothing (scale-kernel; with
#                                --quick, the smoke test's UDP case)
#   sudo ./run.sh [--quick] [--kernel-sender] [--out DIR] [-- FALCON-BENCH-FLAGS...]
#
# Everything comes from this folder and the kernel: iperf3, sockperf,
# memcached, memcaslap, nginx, wrk and ethtool are Debian's, with their own libraries and loader
# (tools/), iproute2's ip and bridge too, so no package registry or network is
# needed; taskset is the system's.
# First `falcon-lab bench --probe` checks that the kernel and the system have
# what the run needs and stops, changing nothing, with a list of what is
# missing. Then the benchmark runs and its results go to one folder,
# results-<host>-<date>/ in the current directory: results.json (every run;
# `./falcon-lab report results.json` re-prints it), report.md (the table),
# chart.svg, bench.log (progress) and probe.txt.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# The bundle's tools, never the host's (lab/toolpath).
FALCON_TOOLS_DIR=$here/tools
export FALCON_TOOLS_DIR
# ip and bridge too, which falcon runs by name: a minimal host (a cloud
# image without iproute2) has none.
PATH=$here/tools:$PATH
export PATH

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
preset=scale
kernel=
out=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) preset=quick ;;
	--kernel-sender) kernel=1 ;;
	--out)
		[ $# -ge 2 ] || { echo "run.sh: --out needs a folder" >&2; exit 2; }
		out=$2
		shift
		;;
	--out=*) out=${1#--out=} ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) echo "run.sh: unknown argument '$1' (falcon-lab bench's own flags go after --; see --help)" >&2; exit 2 ;;
	esac
	shift
done

if [ -n "$kernel" ]; then
	if [ "$preset" = quick ]; then
		set -- --sender kernel --workloads udp-stress:1400 "$@"
	else
		preset=scale-kernel
	fi
fi

if [ "$(uname -m)" != x86_64 ]; then
	echo "run.sh: this bundle is built for x86-64 (linux-amd64); this machine is $(uname -m)" >&2
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "run.sh: run as root (sudo ./run.sh): the testbeds are network namespaces, and falcon loads BPF programs" >&2
	exit 1
fi
host=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
stamp=$(date +%Y%m%d-%H%M%S)
if [ -z "$out" ]; then
	out=results-$host-$stamp
	[ "$preset" = scale ] || out=$out-$preset
fi

echo "== 1/2 probe: can this machine run --preset $preset?"
probe=$(mktemp)
"$here/falcon-lab" bench --probe --preset "$preset" "$@" >"$probe" 2>&1
status=$?
cat "$probe"
if [ $status -ne 0 ]; then
	rm -f "$probe"
	echo
	echo "run.sh: stopped; nothing was changed. This machine lacks what is listed above." >&2
	exit $status
fi
mkdir -p "$out" || exit 1
mv "$probe" "$out/probe.txt" && chmod 644 "$out/probe.txt"
cp "$here/VERSIONS" "$out/VERSIONS" 2>/dev/null

echo
echo "== 2/2 falcon-lab bench --preset $preset $* (progress also in $out/bench.log)"
# Ctrl-C or a TERM (timeout, a job scheduler) reaches falcon, which stops
# the traffic and removes its testbeds; tee ignores both so that the log
# (and falcon's stderr) stays open until it has, and this script goes on to
# save what was measured.
trap 'echo "run.sh: interrupted: falcon is removing its testbeds" >&2' INT TERM HUP
{
	"$here/falcon-lab" bench --preset "$preset" --json "$out/results.json" "$@" 2>&1 >"$out/report.md"
	echo $? >"$out/.status"
} | (trap '' INT TERM HUP && exec tee "$out/bench.log")
status=$(cat "$out/.status" 2>/dev/null || echo 1)
rm -f "$out/.status"
trap - INT TERM HUP

if [ -s "$out/results.json" ]; then
	"$here/falcon-lab" report "$out/results.json" --svg "$out/chart.svg" >/dev/null 2>>"$out/bench.log" ||
		echo "run.sh: could not draw $out/chart.svg (see $out/bench.log)" >&2
	echo
	cat "$out/report.md"
fi
echo
if [ "$status" -eq 0 ]; then
	echo "run.sh: done; results in $out/ (results.json, report.md, chart.svg, bench.log, probe.txt)"
else
	echo "run.sh: falcon-lab bench exited $status; what it measured is in $out/ (bench.log says what failed)" >&2
fi
exit "$status"
