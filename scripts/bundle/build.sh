#!/usr/bin/env bash
# Builds the benchmark bundle, dist/falcon-bench-linux-amd64.tar.gz: the
# static falcon-lab binary that runs the bench, falcon (the node product,
# what the bench measures, for trying it by hand), run.sh, and iperf3, sockperf, ethtool, memcached,
# memcaslap, nginx, wrk and nft (the fast path's) from Debian's packages with every shared library
# they load (glibc and its loader included), so that the bundle runs on a
# machine with no package registry, no network and none of these tools,
# whatever its distribution.
#
# The tools' .debs and those of their libraries are fetched with
# `apt-get download` into a cache and unpacked with `dpkg-deb -x`; nothing is
# copied from the building host's own /usr. Each tool runs through a wrapper
# that starts it with the bundle's loader and library directory, and the
# build fails if the loader would resolve any library outside the bundle.
#
# Usage: build.sh BIN_DIR   (the folder of the static falcon and falcon-lab)
# Env:   BUNDLE_CACHE  where the .debs are kept (default .cache/bundle-debs)
#        BUNDLE_OUT    where the tarball goes (default dist)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bindir=${1:?usage: build.sh BIN_DIR (the folder of falcon and falcon-lab)}
bins=(falcon-lab falcon)
cache=${BUNDLE_CACHE:-$repo/.cache/bundle-debs}
out=${BUNDLE_OUT:-$repo/dist}
name=falcon-bench
tarball=$out/$name-linux-amd64.tar.gz
# Each tool as PACKAGE or PACKAGE:BINARY where they differ.
tools=(iperf3 sockperf ethtool memcached libmemcached-tools:memcaslap nginx wrk iproute2:ip iproute2:bridge nftables:nft)

die() { echo "bundle: $*" >&2; exit 1; }
for c in apt-get dpkg-deb dpkg tar; do
	command -v $c >/dev/null || die "$c is missing: the bundle is built from Debian packages, on Debian or Ubuntu"
done
[ "$(dpkg --print-architecture)" = amd64 ] || die "apt-get download fetches this host's architecture ($(dpkg --print-architecture)); the bundle is linux-amd64"
for b in "${bins[@]}"; do
	[ -x "$bindir/$b" ] || die "$bindir/$b: no such executable (make bundle builds it)"
	# A dynamically linked binary would need the host's libc after all.
	if ldd "$bindir/$b" >/dev/null 2>&1; then
		die "$bindir/$b is dynamically linked; build it with CGO_ENABLED=0"
	fi
done

mkdir -p "$cache" "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fetch PKG: the newest cached .deb of PKG, downloading it when there is none.
# Packages are small and versions change rarely; `rm -r .cache/bundle-debs`
# makes the next build fetch the current ones.
fetch() {
	local pkg=$1 deb
	deb=$(ls -t "$cache/${pkg}"_*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$deb" ]; then
		# As root, apt hands downloads to the _apt user, which cannot write
		# to a cache under a root-only directory.
		local sandbox=()
		[ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
		(cd "$cache" && apt-get download -q "${sandbox[@]}" "$pkg" >/dev/null) ||
			die "apt-get download $pkg failed (no package lists? run apt-get update; no network? fill $cache with the .debs)"
		deb=$(ls -t "$cache/${pkg}"_*.deb | head -n1)
	fi
	echo "$deb"
}

# The dependency closure of the tools, following only library packages:
# they are what the binaries load at run time, and everything else a tool
# depends on (debconf, adduser) is packaging, not code it runs. A tool's
# package that holds no binary of the tool's name is a metapackage (nginx
# where nginx-core holds the binary, as on Ubuntu 22.04): what it depends on
# is followed too.
declare -A seen=() binof=()
for pt in "${tools[@]}"; do binof[${pt%%:*}]=${pt#*:}; done
queue=("${tools[@]%%:*}")
debs=()
while [ ${#queue[@]} -gt 0 ]; do
	pkg=${queue[0]}
	queue=("${queue[@]:1}")
	[ -z "${seen[$pkg]:-}" ] || continue
	seen[$pkg]=1
	deb=$(fetch "$pkg")
	debs+=("$deb")
	# "libc6 (>= 2.34), libssl3 | libssl1.1, foo:any": the first
	# alternative of each, without version or architecture.
	deps=$(dpkg-deb -f "$deb" Pre-Depends Depends | sed -n 's/^[A-Za-z-]*: //p' | tr ',' '\n' |
		sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' | sed '/^$/d' | sort -u)
	meta=
	if [ -n "${binof[$pkg]:-}" ] && ! grep -qE "\./(usr/)?s?bin/${binof[$pkg]}\$" <<<"$(dpkg-deb -c "$deb")"; then
		meta=1
	fi
	for d in $deps; do
		# zlib1g is a library package not named lib* (nginx loads it).
		case $d in lib* | zlib1g) queue+=("$d") ;; *) [ -z "$meta" ] || queue+=("$d") ;; esac
	done
done

root=$work/root
stage=$work/$name

# starts TOOL: the bundle's TOOL runs. --version exits 0 for most; sockperf's
# only on some versions, wrk's prints its usage after the version (status 1),
# nginx takes -v and iproute2's ip and bridge -V: those must at least print their name.
starts() {
	local out
	case $1 in
	sockperf | wrk) out=$("$stage/tools/$1" --version 2>&1 || true) ;;
	nginx) out=$("$stage/tools/nginx" -v 2>&1 || true) ;;
	ip | bridge) out=$("$stage/tools/$1" -V 2>&1 || true) ;;
	*) "$stage/tools/$1" --version >/dev/null 2>&1; return ;;
	esac
	grep -qi "$1" <<<"$out"
}
mkdir -p "$root" "$stage/tools" "$stage/libexec" "$stage/lib" "$stage/licenses"
for deb in "${debs[@]}"; do
	dpkg-deb -x "$deb" "$root"
	pkg=$(dpkg-deb -f "$deb" Package)
	printf '%s %s\n' "$pkg" "$(dpkg-deb -f "$deb" Version)" >>"$work/packages"
	[ ! -f "$root/usr/share/doc/$pkg/copyright" ] || cp "$root/usr/share/doc/$pkg/copyright" "$stage/licenses/$pkg"
done

# Every shared object of the library directories, flat in lib/: regular
# files as they are, symlinks re-pointed at the file's base name (libc6's
# /lib64/ld-linux-x86-64.so.2 is an absolute link into the host's /lib).
for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64; do
	[ -d "$root/$d" ] || continue
	find "$root/$d" -maxdepth 1 -type f -name '*.so*' -exec cp {} "$stage/lib/" \;
	find "$root/$d" -maxdepth 1 -type l -name '*.so*' | while read -r l; do
		b=$(basename "$l") t=$(basename "$(readlink "$l")")
		[ -e "$stage/lib/$b" ] || ln -s "$t" "$stage/lib/$b"
	done
done
[ -f "$stage/lib/ld-linux-x86-64.so.2" ] || [ -L "$stage/lib/ld-linux-x86-64.so.2" ] || die "libc6 brought no loader"

for pt in "${tools[@]}"; do
	t=${pt#*:}
	bin=
	for d in usr/bin usr/sbin sbin bin; do
		# Not a link: iproute2's /sbin/ip points at /bin/ip, an absolute
		# link that would resolve on the building host.
		[ ! -f "$root/$d/$t" ] || [ -L "$root/$d/$t" ] || { bin=$root/$d/$t; break; }
	done
	[ -n "$bin" ] || die "package ${pt%%:*} has no binary $t"
	cp "$bin" "$stage/libexec/$t"
	# The loader is started directly, so the host's loader, ld.so.cache
	# and libraries never take part; LD_PRELOAD and LD_LIBRARY_PATH from
	# the caller's environment would bring host libraries back in.
	cat >"$stage/tools/$t" <<WRAP
#!/bin/sh
# $t from Debian's package, with the bundle's loader and libraries.
d=\$(dirname "\$(readlink -f "\$0")")/..
unset LD_PRELOAD LD_LIBRARY_PATH
exec "\$d/lib/ld-linux-x86-64.so.2" --library-path "\$d/lib" --argv0 $t "\$d/libexec/$t" "\$@"
WRAP
	chmod 755 "$stage/tools/$t"
	# ldd's own method: the bundle's loader lists what it would load. Any
	# library it cannot find, or finds outside lib/, fails the build.
	list=$("$stage/lib/ld-linux-x86-64.so.2" --list --library-path "$stage/lib" "$stage/libexec/$t") ||
		die "$t: the bundle's loader cannot list its libraries"
	bad=$(echo "$list" | grep -v -e 'linux-vdso' -e "=> $stage/lib/" -e "^[[:space:]]*$stage/lib/" || true)
	[ -z "$bad" ] || die "$t loads libraries from outside the bundle:
$bad"
	starts "$t" || die "$t does not start through its wrapper"
	echo "$list" | sed -n "s|.*\($stage/lib/[^ ]*\).*|\1|p" >>"$work/needed"
done
# Only what the tools load stays: libc6 brings a dozen libraries nobody here
# uses. libgcc_s stays whatever the lists say, as glibc opens it itself at
# run time (thread cancellation, unwinding).
echo "$stage/lib/libgcc_s.so.1" >>"$work/needed"
while read -r p; do
	basename "$p"
	[ ! -L "$p" ] || basename "$(readlink "$p")"
done <"$work/needed" | sort -u >"$work/keep"
for f in "$stage/lib"/*; do
	grep -qxF "$(basename "$f")" "$work/keep" || rm "$f"
done
for pt in "${tools[@]}"; do
	t=${pt#*:}
	starts "$t" || die "$t no longer starts once unused libraries are pruned"
done

for b in "${bins[@]}"; do
	cp "$bindir/$b" "$stage/$b"
	chmod 755 "$stage/$b"
done
cp "$repo/scripts/bundle/run.sh" "$stage/run.sh"
cp "$repo/scripts/bundle/README.txt" "$stage/README.txt"
chmod 755 "$stage/run.sh"
{
	for b in "${bins[@]}"; do
		"$stage/$b" version 2>/dev/null || echo "$b (version unknown)"
	done
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
	echo
	echo "Debian packages (tools/ and lib/ come from these, licences in licenses/):"
	sort "$work/packages"
} >"$stage/VERSIONS"

tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner -czf "$tarball.tmp" "$name"
mv "$tarball.tmp" "$tarball"
echo "bundle: $tarball ($(du -h "$tarball" | cut -f1); $(wc -l <"$work/packages") packages: $(cut -d' ' -f1 "$work/packages" | sort | tr '\n' ' '))"
