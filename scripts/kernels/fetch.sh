#!/usr/bin/env bash
# Fetches Debian's own kernel package for a kernel series (6.1, 6.12) with a
# private apt configuration (its own sources list, state and cache under
# CACHE), never touching the machine's apt sources, and unpacks it:
#   CACHE/<series>/root/boot/vmlinuz-*, CACHE/<series>/root/lib/modules/<ver>/
# and writes the release to CACHE/<series>/release. Safe to run again.
# Usage: fetch.sh SERIES [CACHE]
set -euo pipefail
series=$1
cache=${2:-$(cd "$(dirname "$0")/../.." && pwd)/.cache/kernels}
dir=$cache/$series
[ -s "$dir/release" ] && [ -d "$dir/root/lib/modules/$(cat "$dir/release")" ] && exit 0

# The Debian mirror the machine's apt already uses; its proxy settings
# (apt.conf.d) apply too, read before the options below.
# shellcheck source=../lib/debian-mirror.sh
. "$(dirname "$0")/../lib/debian-mirror.sh"
mirror=$(debian_mirror) || { echo "fetch: no Debian mirror to fetch kernel $series from" >&2; exit 1; }

case $series in
6.1) suites="bookworm" ;;
6.12) suites="bookworm-backports trixie" ;;
*) echo "fetch: no Debian suite known for kernel $series (known: 6.1, 6.12)" >&2; exit 2 ;;
esac

apt=$cache/apt
mkdir -p "$apt"/{lists/partial,archives/partial,etc/preferences.d,etc/apt.conf.d} "$dir"
: >"$apt/status"
for s in $suites; do
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $s main"
done >"$apt/etc/sources-$series.list"
opts=(-o Dir::Etc::sourcelist="$apt/etc/sources-$series.list" -o Dir::Etc::sourceparts=- 
	-o Dir::Etc::preferencesparts="$apt/etc/preferences.d" -o Dir::Etc::parts="$apt/etc/apt.conf.d"
	-o Dir::State::lists="$apt/lists-$series" -o Dir::State::status="$apt/status"
	-o Dir::Cache="$apt/cache-$series" -o Dir::Cache::archives="$apt/archives"
	-o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o APT::Get::List-Cleanup=0)
mkdir -p "$apt/lists-$series/partial" "$apt/cache-$series"
echo "fetch: apt update for $suites from $mirror (private config under $apt)"
apt-get "${opts[@]}" update -qq

# Newest linux-image-<series>.N-amd64 (or <series>.0-N-amd64) these suites offer.
pkg=$(apt-cache "${opts[@]}" search --names-only "^linux-image-${series//./\\.}[.-][0-9.+~a-z-]*-amd64\$" |
	awk '{print $1}' | grep -E -- '-amd64$' | grep -vE -- '-(rt|cloud)-amd64$|unsigned' | sort -V | tail -1)
[ -n "$pkg" ] || { echo "fetch: no linux-image-$series.*-amd64 in $suites" >&2; exit 1; }
echo "fetch: $pkg"
(cd "$apt/archives" && apt-get "${opts[@]}" download "$pkg" >/dev/null)
deb=$(ls -t "$apt/archives/${pkg}_"*.deb | head -1)
rm -rf "$dir/root"
dpkg-deb -x "$deb" "$dir/root"
# trixie's packages use the merged /usr layout: one place for both.
[ -d "$dir/root/lib/modules" ] || { [ -d "$dir/root/usr/lib/modules" ] && ln -s usr/lib "$dir/root/lib"; }
rel=$(ls "$dir/root/lib/modules" | head -1)
# The package's postinst would run depmod; modprobe in the guest needs its output.
depmod -b "$dir/root" "$rel"
echo "$rel" >"$dir/release"
echo "$(basename "$deb")" >"$dir/package"
echo "fetch: kernel $rel in $dir/root"
