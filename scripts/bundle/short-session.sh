#!/bin/bash
# A many-core measurement that fits a short lease of a borrowed machine
# (about 8 minutes): the bundle's scale placement, cut to the cases that
# answer "does falcon help where cores are idle?", most important first,
# each part stopped (SIGTERM: falcon saves what it measured and removes its
# testbeds) before the lease would cut it.
#
#   short-session.sh BUNDLE.tar.gz OUTDIR [SECONDS [PARTS]]
#
# PARTS: which parts run, e.g. "p2 p3" (default "p4 p5 p6"). Each part's
# folder is packed into OUTDIR/NAME.tgz as it ends (a device lease returns
# at most 8 files).
#
# OUTDIR gets machine.txt (what the machine is) and one run.sh results
# folder per part, packed. The first lease (results/scale-16cpu-kvm) ran
# p1-tools (host vs docker, vanilla, falcon, falcon+split; sockperf UDP
# stress 16 B and 1400 B, iperf3 TCP), p2-kernel (the same modes with the
# kernel sender at 64 B and 1400 B) and p3-flows (8 UDP flows and UDP
# ping-pong, vanilla and falcon). The next asks what that one left open:
# p4-policy (kernel sender, 64 B and 1400 B, 5 rounds with stage costs:
# falcon's adaptive policy against the paper's, which never stands down),
# p5-tools (sockperf UDP stress 16 B and iperf3 TCP, the same modes) and
# p6-flows (8 UDP flows and ping-pong, the same modes). The adaptive
# policy decides by cause (docs/policy.md); each part's results.json
# records every turn's inputs and verdict per window (falcon.causes), and
# the part's folder gets them as replayable traces too (traces/, one a run:
# falcon-lab report --traces), so that the decisions on this machine can be
# replayed offline against the decision code. p7-control asks p4's question
# again with an A/A control (vanilla@aa) and 8 rounds: the second lease had
# none, so its ratios could not be told from vanilla's own spread. p8-cold
# runs 64 B first in every falcon session, 4 s windows without warm-up: a
# cold flow's engagement (2 s after the flow began at the earliest).
set -u
bundle=$1
out=$2
budget=${3:-450}
parts=${4:-p4 p5 p6}
start=$SECONDS
mkdir -p "$out"
{
	echo "date: $(date -u +%FT%TZ)"
	echo "uname: $(uname -a)"
	echo "nproc: $(nproc) online: $(cat /sys/devices/system/cpu/online)"
	echo "virt: $(systemd-detect-virt 2>/dev/null || echo unknown) container: $(systemd-detect-virt -c 2>/dev/null || echo unknown)"
	grep -m1 'model name' /proc/cpuinfo
	grep -m1 -o 'hypervisor' /proc/cpuinfo || echo "no hypervisor flag"
	echo "dmi: $(cat /sys/class/dmi/id/sys_vendor /sys/class/dmi/id/product_name 2>/dev/null | tr '\n' ' ')"
	free -g | head -2
	echo "id: $(id)"
	echo "ip: $(command -v ip) taskset: $(command -v taskset)"
	lscpu 2>/dev/null
	echo "-- numa"
	ls /sys/devices/system/node 2>/dev/null
	echo "-- /proc/cmdline: $(cat /proc/cmdline)"
	echo "-- cpufreq governor: $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo none)"
	echo "-- load at start: $(cat /proc/loadavg)"
	echo "-- os: $(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME")"
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

dir=$(mktemp -d)
tar xzf "$bundle" -C "$dir" || exit 1
b=$dir/falcon-bench

# part NAME SECONDS run.sh-ARGS...: run one part, stopped in time.
part() {
	name=$1
	want=$2
	shift 2
	case " $parts " in *" ${name%%-*} "*) ;; *) return ;; esac
	left=$((budget - (SECONDS - start)))
	if [ "$left" -lt 40 ]; then
		echo "== $name: skipped, $left s left" | tee -a "$out/skipped.txt"
		return
	fi
	[ "$want" -gt "$left" ] && want=$left
	echo "== $name ($want s at most; $left s left)"
	(cd "$out" && timeout -k 25 -s TERM "$want" "$b/run.sh" --out "$name" "$@") >"$out/$name.console" 2>&1
	echo "== $name: exit $? after $((SECONDS - start)) s"
	tail -5 "$out/$name.console"
	[ ! -s "$out/$name/results.json" ] ||
		"$b/falcon-lab" report --traces "$out/$name/traces" "$out/$name/results.json" >/dev/null 2>>"$out/$name.console"
	[ ! -d "$out/$name" ] || { tar czf "$out/$name.tgz" -C "$out" "$name" && rm -rf "${out:?}/$name"; }
}

common="--runs 3 --duration 2s --interleave"
part p1-tools 200 -- --layouts host,docker --modes vanilla,falcon,falcon+split \
	--workloads udp-stress:16,udp-stress:1400,tcp:128K $common
part p2-kernel 130 --kernel-sender -- --layouts docker --modes vanilla,falcon,falcon+split \
	--workloads udp-stress:64,udp-stress:1400 $common
part p3-flows 130 -- --layouts docker --modes vanilla,falcon \
	--workloads multi-flow:16,latency:16 --flows 8 $common
policy="--modes vanilla,falcon,falcon:policy=paper,falcon+split:policy=paper"
part p4-policy 170 --kernel-sender -- --layouts docker $policy \
	--workloads udp-stress:64,udp-stress:1400 --runs 5 --duration 2s --interleave --stage-cost
part p7-control 300 --kernel-sender -- --layouts docker --modes vanilla,vanilla@aa,falcon,falcon:policy=paper \
	--workloads udp-stress:64,udp-stress:1400 --runs 8 --duration 2s --interleave --stage-cost
part p8-cold 150 --kernel-sender -- --layouts docker --modes vanilla,falcon \
	--workloads udp-stress:64 --runs 4 --duration 4s --warmup 0s --interleave
part p5-tools 120 -- --layouts docker $policy --workloads udp-stress:16,tcp:128K $common
part p6-flows 120 -- --layouts docker --modes vanilla,falcon,falcon:policy=paper \
	--workloads multi-flow:16,latency:16 --flows 8 $common
echo "== done after $((SECONDS - start)) s; load $(cat /proc/loadavg)"
PATH=$b/tools:$PATH ip netns list | sed 's/^/left netns: /'
rm -rf "$dir"
