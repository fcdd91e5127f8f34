package datapath

// The generated *_bpfel.go/.o are committed so that building falcon needs
// no clang; `make generate` rebuilds them from bpf/ (scripts/bpf2go.sh).
//go:generate ../../scripts/bpf2go.sh falcon falcon.c -type config -type load -type hook -type counters -type flowlet_key -type flowlet -type steer_key -type debug -type stage_dev -type done -type split_dev -type gro_state
//go:generate ../../scripts/bpf2go.sh split split.c -type split_stats
//go:generate ../../scripts/bpf2go.sh guard guard.c
//go:generate ../../scripts/bpf2go.sh fastpath fastpath.c -type fp_config -type fp_key -type fp_pending -type fp_ingress -type fp_egress -type fp_counters -type fp_ct_event -type fp_tenant -type fp_share -type fp_home -type fp_whole_rule
