#!/usr/bin/env bash
# Compiles one of bpf/'s programs with bpf2go into the Go package that
# loads it, NAME_bpfel.go and NAME_bpfel.o, which are committed so that
# building falcon needs no clang (make generate rebuilds them all). Every
# gen.go calls it the same way, from its package's folder (go generate's
# working directory):
#
#	//go:generate ../../scripts/bpf2go.sh NAME PROGRAM.c [-type T]...
#
# PROGRAM.c is a path under bpf/ (lab/stagetrace.c for the lab's). The
# flags and the include paths are the same for every program: bpf/include
# (the vendored asm headers), bpf/ (the shared headers) and the program's
# own folder. They are derived here, relative to the package, as they were
# always given: paths end up in the objects' debug information, and a
# checkout anywhere must build the same bytes.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bpf2go.sh NAME PROGRAM.c [-type T]..." >&2; exit 2; }
name=$1 prog=$2
shift 2
bpf=$(realpath --relative-to=. "$(dirname "$0")/../bpf")
[ -f "$bpf/$prog" ] || { echo "bpf2go.sh: no $bpf/$prog" >&2; exit 1; }
# Debian installs clang 14 as clang-14 only, unless clang is set up too.
BPF2GO_CC=${BPF2GO_CC:-clang}
command -v "$BPF2GO_CC" >/dev/null || BPF2GO_CC=clang-14
export BPF2GO_CC
if ! command -v "$BPF2GO_CC" >/dev/null || [ ! -f /usr/include/bpf/bpf_helpers.h ]; then
	echo "bpf2go.sh: rebuilding the BPF objects needs clang and libbpf's headers" \
		"(Debian: apt-get install clang-14 libbpf-dev); building falcon does not" >&2
	exit 1
fi
exec go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel "$@" "$name" "$bpf/$prog" -- \
	-I"$bpf/include" -I"$bpf" -O2 -g -Wall -Werror
