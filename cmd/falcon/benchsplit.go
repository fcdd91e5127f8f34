package main

import "github.com/falconnet/falcon/internal/bench"

// "falcon+split": falcon with the NIC stage split off the interrupt CPU
// (XDP + cpumap) over the default split set, the Falcon set. On the
// testbed the NIC stage runs on the sender's CPU (the veth wire's NAPI),
// so splitting moves skb building, GRO and decapsulation off the CPU
// that also sends.
func init() { bench.RegisterMode(falconBench{split: true}) }
