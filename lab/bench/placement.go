package bench

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/schema"
)

// Role placement. On one machine the testbed's two hosts share the CPUs;
// on many cores they can be given CPUs of their own, so that the receiving
// host looks like a real one: a core that takes the NIC's interrupts, cores
// that run the applications, and spare cores Falcon may move stages to,
// while the sending host's CPUs stand for another machine.
//
//	sender    the clients, and the sending host's own receive work (ACKs;
//	          unless --client-host-rps off)
//	NIC       the receiving host's NIC poll: its GRO, XDP and the first
//	          softirq stage, as one dedicated interrupt core would run them
//	receiver  the servers (the receiving applications)
//	Falcon    the set the agent may steer stages to (falcon's cpus, the
//	          split's cpumap CPUs by default, and rps's rps_cpus)

// ScaleMinCPUs is the fewest online CPUs the scale preset runs on: three
// senders, one NIC CPU, two receivers and two Falcon CPUs.
const ScaleMinCPUs = 8

// scalePlacement splits the online CPUs into the scale preset's roles, in
// CPU order: a quarter (at least three) for the senders, the next one for
// the NIC, and the rest halved between receivers and Falcon, Falcon taking
// the odd one. 8 CPUs: senders 0-2, NIC 3, receivers 4-5, Falcon 6-7; 16:
// 0-3, 4, 5-9, 10-15. Hyperthread siblings are not paired up: on machines
// that number them far apart (0 and N/2 share a core) the flags say better.
func scalePlacement(online []int) (schema.Placement, error) {
	n := len(online)
	if n < ScaleMinCPUs {
		return schema.Placement{}, &ConfigError{NeedCPUs: ScaleMinCPUs, Msg: fmt.Sprintf("the scale presets need at least %d online CPUs "+
			"(3 senders, 1 NIC, 2 receivers, 2 Falcon); this machine has %d (%s)", ScaleMinCPUs, n, cpuset.Format(online))}
	}
	s := max(3, n/4)
	rest := online[s+1:]
	return schema.Placement{
		Sender:   slices.Clone(online[:s]),
		NIC:      online[s],
		Receiver: slices.Clone(rest[:len(rest)/2]),
		Falcon:   slices.Clone(rest[len(rest)/2:]),
	}, nil
}

// scalePreset is FALCON's evaluation on a receiving host with cores to
// spare: the paper's sizes of UDP stress, 1-16 flows of UDP (16 B) and TCP
// (4 KiB), one large-message TCP flow and UDP ping-pong, on the host
// network and the docker overlay, vanilla against the Kubernetes study's
// RPS and RFS and falcon with and without the split, with every role on
// CPUs of its own (scalePlacement). One sender per sender CPU. 3 runs of 5 s.
func scalePreset(online []int) (map[string]string, error) {
	p, err := scalePlacement(online)
	if err != nil {
		return nil, err
	}
	return flagValues{
		"layouts":   "host,docker",
		"modes":     "vanilla,rps,rfs,falcon,falcon+split",
		"workloads": "udp-stress,multi-flow:16,multi-flow-tcp:4K,tcp:128K,latency:16",
		"sizes":     paperSizes,
		"flows":     "1,2,4,8,16",
		"duration":  "5s",
		"runs":      "3",
		"clients":   strconv.Itoa(len(p.Sender)),
	}.with(placementFlags(p)), nil
}

// flagValues are bench flags by name.
type flagValues map[string]string

// with is m with every value of o set over it.
func (m flagValues) with(o flagValues) flagValues {
	for k, v := range o {
		m[k] = v
	}
	return m
}

// scaleKernelPreset is the scale preset's UDP cases with the kernel sender
// (kernelsend.go) in place of the tools' clients: what the receiving host
// does when the sending side costs it nothing, up to the sizes one frame
// carries.
func scaleKernelPreset(online []int) (map[string]string, error) {
	m, err := scalePreset(online)
	if err != nil {
		return nil, err
	}
	m["sender"] = schema.SenderKernel
	m["workloads"] = "udp-stress,multi-flow:64"
	m["sizes"] = "16,64,256,1K,1400"
	return m, nil
}

// calibratePreset is falcon-lab sim's calibration (lab/sim, Calibrate): a
// sender CPU and a receiver CPU apart, as the default placement on 2 CPUs.
func calibratePreset(online []int) (map[string]string, error) {
	if len(online) < 2 {
		return nil, &ConfigError{NeedCPUs: 2, Msg: fmt.Sprintf("the calibration needs 2 online CPUs (a sender's and a receiver's); "+
			"this machine has %d (%s)", len(online), cpuset.Format(online))}
	}
	return map[string]string{
		"layouts":       "docker",
		"modes":         "vanilla,rps:rps-cpus=1,rfs,rps,falcon,falcon:policy=paper,falcon+split",
		"workloads":     "udp",
		"sizes":         "64,512,1400",
		"duration":      "4s",
		"runs":          "10",
		"interleave":    "true",
		"stage-cost":    "true",
		"bpf-stats":     "true",
		"sender-cpus":   strconv.Itoa(online[0]),
		"receiver-cpus": strconv.Itoa(online[1]),
	}, nil
}

// placementFlags are the placement as bench flags.
func placementFlags(p schema.Placement) flagValues {
	return flagValues{
		"sender-cpus":   cpuset.Format(p.Sender),
		"nic-cpu":       strconv.Itoa(p.NIC),
		"receiver-cpus": cpuset.Format(p.Receiver),
		"falcon-cpus":   cpuset.Format(p.Falcon),
	}
}

// checkPlacement rejects placements that cannot model two machines. It applies once
// a NIC CPU or a Falcon set is given (the placement is then meant to be
// one); the default 1- and 2-CPU layouts share CPUs on purpose.
func checkPlacement(p schema.Placement) error {
	if p.NIC < 0 && p.Falcon == nil {
		return nil
	}
	if p.NIC >= 0 && slices.Contains(p.Receiver, p.NIC) {
		return configErrorf("--nic-cpu %d is also a receiver CPU (--receiver-cpus %s): the NIC CPU stands for a core that "+
			"only takes the NIC's interrupts", p.NIC, cpuset.Format(p.Receiver))
	}
	host := map[int]string{}
	if p.NIC >= 0 {
		host[p.NIC] = "--nic-cpu"
	}
	for _, c := range p.Receiver {
		host[c] = "--receiver-cpus"
	}
	for _, c := range p.Falcon {
		if _, ok := host[c]; !ok {
			host[c] = "--falcon-cpus"
		}
	}
	for _, c := range p.Sender {
		if f, ok := host[c]; ok {
			return configErrorf("--sender-cpus %s and %s share CPU %d: the senders stand for another machine, "+
				"whose CPUs the receiving host must not use", cpuset.Format(p.Sender), f, c)
		}
	}
	return nil
}
