package datapath

// The generated falcon_bpfel.go/.o are committed so that building falcon
// needs no clang; `make generate` rebuilds them from bpf/.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -type config -type load -type hook -type counters -type flowlet_key -type flowlet -type steer_key -type debug -type stage_dev -type done -type split_dev -type gro_state falcon ../../bpf/falcon.c -- -I../../bpf/include -I../../bpf -O2 -g -Wall -Werror
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -type split_stats split ../../bpf/split.c -- -I../../bpf/include -I../../bpf -O2 -g -Wall -Werror
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel guard ../../bpf/guard.c -- -I../../bpf/include -I../../bpf -O2 -g -Wall -Werror
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -type fp_config -type fp_key -type fp_pending -type fp_ingress -type fp_egress -type fp_counters -type fp_ct_event -type fp_tenant -type fp_share fastpath ../../bpf/fastpath.c -- -I../../bpf/include -I../../bpf -O2 -g -Wall -Werror
