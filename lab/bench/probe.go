package bench

import (
	"github.com/falconnet/falcon/lab/benchprobe"
	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/schema"
)

// ProbeNeeds is what a config will use from the machine, for the bench
// probe (benchprobe.ProbeBench): the overlay layouts need VXLAN, docker and
// flannel a bridge, the falcon modes BPF in tc, the split XDP, --nic-cpu
// threaded NAPI; and the tools the testbeds and workloads start.
func ProbeNeeds(c schema.Config) benchprobe.BenchNeeds {
	var n benchprobe.BenchNeeds
	for _, l := range c.Layouts {
		switch l {
		case "host":
		case "docker", "flannel", "flannel-daemon", "docker-swarm", "k8s":
			n.VXLAN, n.Bridge = true, true
		default:
			n.VXLAN = true
		}
	}
	for _, spec := range c.Modes {
		bpf, xdp := modes.NeedsBPF(spec)
		n.BPF, n.XDP = n.BPF || bpf, n.XDP || xdp
	}
	n.ThreadedNAPI = c.NICCPU != nil
	n.KernelSender = c.Sender == schema.SenderKernel
	// The testbed's (ip, bridge, ethtool), the pinning wrapper's, then the
	// workloads' own.
	n.Tools = append([]string{"ip", "bridge", "ethtool", "taskset"}, tools(c)...)
	return n
}

// ProbeNeedsAll is what the most demanding config needs, for a machine
// whose config could not be resolved (too few CPUs for the preset): the
// probe then still lists everything else that is missing.
func ProbeNeedsAll(why string) benchprobe.BenchNeeds {
	return benchprobe.BenchNeeds{VXLAN: true, Bridge: true, BPF: true, XDP: true, ThreadedNAPI: true, KernelSender: true,
		Tools: []string{"ip", "bridge", "ethtool", "taskset", "iperf3", "sockperf"}, CPUs: why}
}
