#!/usr/bin/env bash
# Installs what falcon's benchmark and tests need (memcached and memcaslap: the bench's
# memcached workload; nginx and wrk: its web workload; tmux: falcon top's terminal
# test; nftables, iptables and gcc: the flannel-daemon layout's flanneld; docker.io:
# the docker-swarm layout's daemons; chromium: the headless browser falcon report
# --html's page is checked in) on
# Debian/Ubuntu, as root.
# Safe to run again: it installs only what is missing.
set -euo pipefail

[ "$(id -u)" -eq 0 ] || { echo "setup: run as root (namespaces, BPF and sysfs need it)" >&2; exit 1; }

need=()
for pair in iperf3:iperf3 sockperf:sockperf memcached:memcached memcaslap:libmemcached-tools nginx:nginx wrk:wrk ethtool:ethtool ip:iproute2 make:make taskset:util-linux python3:python3 ping:iputils-ping bridge:iproute2 tmux:tmux nft:nftables iptables:iptables gcc:gcc chromium:chromium dockerd:docker.io nsenter:util-linux; do
	cmd=${pair%%:*} pkg=${pair#*:}
	PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
dpkg -s python3-venv >/dev/null 2>&1 || need+=(python3-venv)   # venv for the manifest validator
# make test-kernels: QEMU, busybox for the guest's initramfs, kmod (depmod, modprobe), cpio.
kneed=()
for pair in qemu-system-x86_64:qemu-system-x86 busybox:busybox-static depmod:kmod cpio:cpio xz:xz-utils; do
	cmd=${pair%%:*} pkg=${pair#*:}
	PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null 2>&1 || kneed+=("$pkg")
done
if [ ${#need[@]} -gt 0 ] || [ ${#kneed[@]} -gt 0 ]; then
	echo "setup: installing ${need[*]} ${kneed[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# iperf3's package asks whether to start a daemon; the answer is no.
	echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
	[ ${#need[@]} -eq 0 ] || apt-get install -y -qq "${need[@]}" >/dev/null
	[ ${#kneed[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${kneed[@]}" >/dev/null
	# memcached's package starts a daemon where an init system runs; the
	# bench starts its own inside the testbed, and this one would serve
	# nobody.
	case " ${need[*]} " in *" memcached "*)
		if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q memcached 2>/dev/null; then
			systemctl disable --now -q memcached || true
		fi ;;
	esac
	# So does docker.io's (a docker0 bridge and iptables rules in the host's
	# own namespace): the docker-swarm layout runs its own daemons, inside
	# the testbed, with their own roots.
	case " ${need[*]} " in *" docker.io "*)
		if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q docker 2>/dev/null; then
			systemctl disable --now -q docker.socket docker containerd 2>/dev/null || true
		elif [ -x /etc/init.d/docker ] && /etc/init.d/docker status >/dev/null 2>&1; then
			/etc/init.d/docker stop >/dev/null || true
			update-rc.d docker disable >/dev/null 2>&1 || true
		fi ;;
	esac
	# So does nginx's, on port 80, with systemd or through its init script:
	# the bench runs its own from a temp directory.
	case " ${need[*]} " in *" nginx "*)
		if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q nginx 2>/dev/null; then
			systemctl disable --now -q nginx || true
		elif [ -x /etc/init.d/nginx ] && /etc/init.d/nginx status >/dev/null 2>&1; then
			/etc/init.d/nginx stop >/dev/null || true
			update-rc.d nginx disable >/dev/null 2>&1 || true
		fi ;;
	esac
fi

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH=$PATH:/usr/local/go/bin
fi
command -v go >/dev/null 2>&1 || { echo "setup: Go 1.26 or newer is needed to build falcon (https://go.dev/doc/install)" >&2; exit 1; }

# Offline Kubernetes schema validator for deploy/kubernetes (kubernetes-validate in a venv).
"$(dirname "$0")/../deploy/kubernetes/validate.sh" --install

# The flannel-daemon testbed layout's flanneld, etcd and CNI plugins, built
# once from the Go module proxy at pinned versions into .cache/daemons.
"$(dirname "$0")/daemons.sh"

# Tracepoints used by the tests live in tracefs.
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
echo "setup: ready ($(go version | cut -d' ' -f3), kernel $(uname -r), $(nproc) CPUs)"
