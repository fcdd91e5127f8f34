#!/usr/bin/env bash
# Sets this machine up for falcon (Debian or Ubuntu, as root). Safe to run
# again: it installs only what is missing and builds only what is not built.
#   scripts/setup.sh            what `make demo` needs: Go 1.26, iproute2,
#                               ethtool, iperf3, sockperf, util-linux, make,
#                               and nftables (the fast path reads the ruleset)
#   scripts/setup.sh --bench    also every bench workload's tools: memcached
#                               and memcaslap, nginx and wrk
#   scripts/setup.sh --daemons  also the real daemons of two testbed layouts:
#                               flannel-daemon's flanneld, etcd and CNI plugins
#                               (built once, about 3 minutes: scripts/daemons.sh)
#                               with nftables, iptables and gcc; docker-swarm's
#                               docker.io
#   scripts/setup.sh --k8s      also the k8s layout's: Debian's containerd,
#                               runc and iptables, and Kubernetes with etcd,
#                               flanneld and the CNI plugins (built once from
#                               the module proxy, about 7 minutes:
#                               scripts/k8s/build.sh), and kube-network-policies
#                               for its --netpol (scripts/k8s/netpol.sh)
#   scripts/setup.sh --cilium   also the k8s-cilium layout's: --k8s, clang-19
#                               (the agent compiles its datapath with clang
#                               >= 18.1) and Cilium's agent and CNI plugin
#                               (built once from the module proxy:
#                               scripts/cilium/build.sh)
#   scripts/setup.sh --test     everything `make test` and `make test-kernels`
#                               need (they run it themselves): --bench,
#                               --daemons, --k8s, tmux (falcon top's test), chromium
#                               (report --html's), the Kubernetes manifest
#                               validator, QEMU, busybox and kmod (the kernel
#                               guests)
# Without Go 1.26 it installs Debian's Go and lets it fetch the toolchain
# go.mod names through the module proxy (GOTOOLCHAIN=auto), or says what to
# install.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bench=0 daemons=0 test=0 k8s=0 cilium=0
for a in "$@"; do
	case $a in
	--bench) bench=1 ;;
	--daemons) daemons=1 ;;
	--k8s) k8s=1 ;;
	--cilium) k8s=1 cilium=1 ;;
	--test) bench=1 daemons=1 k8s=1 test=1 ;;
	-h | --help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "setup: unknown option $a (see scripts/setup.sh --help)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "setup: run as root (namespaces, BPF and sysfs need it)" >&2; exit 1; }

# command:package pairs, by what needs them.
demo_pkgs="iperf3:iperf3 sockperf:sockperf ethtool:ethtool ip:iproute2 bridge:iproute2 taskset:util-linux nsenter:util-linux make:make nft:nftables"
bench_pkgs="memcached:memcached memcaslap:libmemcached-tools nginx:nginx wrk:wrk"
daemon_pkgs="nft:nftables iptables:iptables gcc:gcc dockerd:docker.io"
k8s_pkgs="containerd:containerd ctr:containerd runc:runc iptables:iptables nsenter:util-linux"
# Not clang: the agent runs /usr/lib/llvm-19/bin/clang (see scripts/cilium/build.sh).
cilium_pkgs="clang-19:clang-19"
test_pkgs="python3:python3 ping:iputils-ping tmux:tmux chromium:chromium"
# The kernel guests' (make test-kernels), without recommends: QEMU's pull in a desktop.
kernel_pkgs="qemu-system-x86_64:qemu-system-x86 busybox:busybox-static depmod:kmod cpio:cpio xz:xz-utils"

missing() { # missing PAIR...: the packages of the commands not found
	local pair cmd
	for pair in "$@"; do
		cmd=${pair%%:*}
		PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null 2>&1 || echo "${pair#*:}"
	done | sort -u
}
pairs=$demo_pkgs
[ $bench -eq 0 ] || pairs="$pairs $bench_pkgs"
[ $daemons -eq 0 ] || pairs="$pairs $daemon_pkgs"
[ $test -eq 0 ] || pairs="$pairs $test_pkgs"
[ $k8s -eq 0 ] || pairs="$pairs $k8s_pkgs"
[ $cilium -eq 0 ] || pairs="$pairs $cilium_pkgs"
# shellcheck disable=SC2086
mapfile -t need < <(missing $pairs)
[ $test -eq 0 ] || dpkg -s python3-venv >/dev/null 2>&1 || need+=(python3-venv) # the manifest validator's venv
kneed=()
# shellcheck disable=SC2086
[ $test -eq 0 ] || mapfile -t kneed < <(missing $kernel_pkgs)

updated=0
apt_install() { # apt_install [apt-get install options] PACKAGE...
	export DEBIAN_FRONTEND=noninteractive
	if [ $updated -eq 0 ]; then
		apt-get update -qq
		updated=1
	fi
	apt-get install -y -qq "$@" >/dev/null
}

# A daemon the package starts where an init system runs serves nobody here:
# the bench and the testbed start their own (memcached and nginx in the
# testbed, docker-swarm's dockerd with its own roots; docker.io's would add
# a docker0 bridge and iptables rules to the host's own namespace).
stop_service() { # stop_service PACKAGE UNIT...
	case " ${need[*]} " in *" $1 "*) ;; *) return 0 ;; esac
	shift
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q "$1" 2>/dev/null; then
		systemctl disable --now -q "$@" 2>/dev/null || true
	elif [ -x "/etc/init.d/$1" ] && "/etc/init.d/$1" status >/dev/null 2>&1; then
		"/etc/init.d/$1" stop >/dev/null || true
		update-rc.d "$1" disable >/dev/null 2>&1 || true
	fi
}

if [ ${#need[@]} -gt 0 ] || [ ${#kneed[@]} -gt 0 ]; then
	echo "setup: installing ${need[*]} ${kneed[*]}"
	# iperf3's package asks whether to start a daemon; the answer is no.
	echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
	[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
	[ ${#kneed[@]} -eq 0 ] || apt_install --no-install-recommends "${kneed[@]}"
	stop_service memcached memcached
	stop_service docker.io docker docker.socket containerd
	stop_service containerd containerd
	stop_service nginx nginx
fi

# shellcheck source=lib/go.sh
. "$root/scripts/lib/go.sh"
ensure_go

if [ $test -eq 1 ]; then
	# Offline Kubernetes schema validator for deploy/kubernetes (kubernetes-validate in a venv).
	"$root/deploy/kubernetes/validate.sh" --install
fi
if [ $daemons -eq 1 ]; then
	"$root/scripts/daemons.sh"
fi
if [ $k8s -eq 1 ]; then
	"$root/scripts/k8s/build.sh"
	"$root/scripts/k8s/netpol.sh"
fi
if [ $cilium -eq 1 ]; then
	"$root/scripts/cilium/build.sh"
fi

# Tracepoints used by the tests live in tracefs.
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
echo "setup: ready ($(go version | cut -d' ' -f3), kernel $(uname -r), $(nproc) CPUs)"
