package stagetrace

// The generated *_bpfel.go/.o are committed so that building falcon-lab
// needs no clang; `make generate` rebuilds them from bpf/lab/
// (scripts/bpf2go.sh).
//go:generate ../../scripts/bpf2go.sh stagetrace lab/stagetrace.c -type flow -type stage_key -type stage_val -type seq_val -type seq_dev -type path -type hop
//go:generate ../../scripts/bpf2go.sh stagecost lab/stagecost.c -type cost_key -type cost_val
