package stagetrace

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror" -type flow -type stage_key -type stage_val -type seq_val -type seq_dev -type path -type hop stagetrace ../../bpf/stagetrace.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror" -type cost_key -type cost_val stagecost ../../bpf/stagecost.c
