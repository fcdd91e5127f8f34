# shellcheck shell=bash
# ensure_go: makes `go` in PATH build falcon, for setup.sh (as root, with
# apt_install defined; $root is the checkout). Go 1.21 and newer fetch the
# toolchain go.mod names (its toolchain line) through the module proxy by
# themselves (GOTOOLCHAIN=auto), so any of them will do: the one in PATH,
# in /usr/local/go, Debian's; else Debian's is installed when it is new
# enough, and otherwise this says what to install.

# go_minor GO: the minor version GO runs itself (1.26.8 -> 26), or 0.
go_minor() {
	local v
	v=$(cd / && GOTOOLCHAIN=local "$1" version 2>/dev/null) || { echo 0; return; }
	v=${v#go version go1.}
	echo "${v%%[!0-9]*}"
}

# candidate_minor PACKAGE: the minor Go version apt would install, or 0.
candidate_minor() {
	local v
	v=$(apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
	v=${v#*:}
	case $v in 1.*) v=${v#1.}; echo "${v%%[!0-9]*}" ;; *) echo 0 ;; esac
}

# find_go: the newest go here that can build falcon (>= 1.21), or nothing.
find_go() {
	local g best="" bm=0 m
	for g in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go /usr/lib/go-1.*/bin/go; do
		[ -x "$g" ] || continue
		m=$(go_minor "$g")
		if [ "$m" -ge 21 ] && [ "$m" -gt "$bm" ]; then
			best=$g bm=$m
		fi
	done
	echo "$best"
}

# install_debian_go: Debian's golang-go when it is 1.21 or newer, else the
# newest golang-1.NN-go apt offers (bookworm-backports has them, where
# enabled).
install_debian_go() {
	local p best="" bm=0 m
	[ -n "${updated:-}" ] && [ "$updated" -eq 1 ] || { apt-get update -qq; updated=1; }
	if [ "$(candidate_minor golang-go)" -ge 21 ]; then
		echo "setup: installing Debian's Go (golang-go)"
		apt_install golang-go
		return
	fi
	for p in $(apt-cache search --names-only '^golang-1\.[0-9]+-go$' 2>/dev/null | awk '{ print $1 }'); do
		m=${p#golang-1.}
		m=${m%-go}
		if [ "$m" -ge 21 ] && [ "$m" -gt "$bm" ] && [ "$(candidate_minor "$p")" -ge 21 ]; then
			best=$p bm=$m
		fi
	done
	if [ -n "$best" ]; then
		echo "setup: installing Debian's Go ($best)"
		apt_install "$best"
	fi
}

ensure_go() {
	local g want need_minor
	want=$(awk '$1 == "toolchain" { print $2; exit }' "$root/go.mod")
	[ -n "$want" ] || want=go$(awk '$1 == "go" { print $2; exit }' "$root/go.mod")
	need_minor=$(awk '$1 == "go" { split($2, v, "."); print v[2]; exit }' "$root/go.mod")
	g=$(find_go)
	if [ -z "$g" ]; then
		install_debian_go
		g=$(find_go)
	fi
	if [ -z "$g" ]; then
		cat >&2 <<EOF
setup: falcon needs $want. This machine has no Go of 1.21 or newer (which fetches
$want by itself) and its apt sources offer Go 1.$(candidate_minor golang-go) at most. Either
  - install Go from https://go.dev/dl/: tar -C /usr/local -xzf go1.26.*.linux-amd64.tar.gz
    (then /usr/local/go/bin/go; setup finds it there), or
  - on Debian 12, add bookworm-backports to apt's sources and run
    apt-get install -t bookworm-backports golang-go
and run scripts/setup.sh again.
EOF
		exit 1
	fi
	if [ "$(command -v go || true)" != "$g" ]; then
		echo "setup: using $g; put $(dirname "$g") first in PATH for make (or run make GO=$g)"
		export PATH=$(dirname "$g"):$PATH
	fi
	[ "$(go_minor "$g")" -lt "$need_minor" ] || return 0
	# An older Go fetches the toolchain only where GOTOOLCHAIN is auto (a
	# go.env or go env -w may say local), and does it now, once, into the
	# module cache, rather than in the middle of make.
	if [ "${GOTOOLCHAIN:-}" = local ]; then
		echo "setup: $g is older than $want, and GOTOOLCHAIN=local in the environment keeps it from fetching $want: unset it, or install $want from https://go.dev/dl/" >&2
		exit 1
	fi
	if [ "$(cd / && go env GOTOOLCHAIN)" = local ]; then
		echo "setup: $g is older than $want and its GOTOOLCHAIN is local: go env -w GOTOOLCHAIN=auto"
		(cd / && go env -w GOTOOLCHAIN=auto)
	fi
	if ! (cd "$root" && go version >/dev/null); then
		echo "setup: $g could not fetch $want through the module proxy ($(go env GOPROXY)); install $want from https://go.dev/dl/" >&2
		exit 1
	fi
}
