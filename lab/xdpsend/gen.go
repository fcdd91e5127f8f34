package xdpsend

// The generated xdpsend_bpfel.go/.o are committed so that building falcon
// needs no clang; `make generate` rebuilds them from bpf/.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel xdpsend ../../bpf/xdpsend.c -- -I../../bpf/include -I../../bpf -O2 -g -Wall -Werror
