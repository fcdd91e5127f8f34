# shellcheck shell=bash
# The cache of what scripts/daemons.sh, scripts/k8s/build.sh and
# scripts/k8s/netpol.sh build from
# the Go module proxy, shared by every clone on the machine: FALCON_CACHE
# (/var/cache/falcon as root, else ~/.cache/falcon). A build lives in a
# directory named by a digest of its pins (the versions it was built from,
# Go's included), so a change of any pin builds anew and a second run builds
# nothing; "ok" in it marks it finished, and the checkout's
# .cache/<kind>/current links to it. Callers set root (the checkout) and
# pins.

# cache_open KIND PREFIX [--force]: sets dir (FALCON_CACHE/KIND/PREFIX and
# the pins' digest) and current; if that build is finished and --force is
# not given, links current to it, says so and exits; otherwise empties dir
# for a new build and sets start.
cache_open() {
	if [ -z "${FALCON_CACHE:-}" ]; then
		FALCON_CACHE=/var/cache/falcon
		[ "$(id -u)" -eq 0 ] || FALCON_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/falcon
	fi
	dir=$FALCON_CACHE/$1/$2$(printf %s "$pins" | sha256sum | cut -c1-12)
	current=$root/.cache/$1/current
	mkdir -p "$root/.cache/$1"
	if [ "${3:-}" != --force ] && [ -f "$dir/ok" ]; then
		ln -sfn "$dir" "$current"
		echo "$1: built ($pins) in $dir"
		exit 0
	fi
	start=$(date +%s)
	rm -rf "$dir"
	mkdir -p "$dir/bin" "$dir/cni" "$dir/build"
}

# cache_close KIND: marks the build in dir finished and links current to it.
cache_close() {
	rm -rf "$dir/build"
	printf '%s\n' "$pins" >"$dir/pins"
	touch "$dir/ok"
	ln -sfn "$dir" "$current"
	echo "$1: built ($pins) in $dir in $(($(date +%s) - start)) s"
}
