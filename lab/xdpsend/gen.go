package xdpsend

// The generated *_bpfel.go/.o are committed so that building falcon-lab
// needs no clang; `make generate` rebuilds them from bpf/lab/
// (scripts/bpf2go.sh).
//go:generate ../../scripts/bpf2go.sh xdpsend lab/xdpsend.c
