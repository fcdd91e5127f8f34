package bench

import (
	"slices"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
)

// StudyModes are the Kubernetes RPS/RFS study's five configurations as
// bench modes: Baseline (vanilla), RPS, RPS+, RFS and RFS+ ("+": also
// inside the containers). The command registers all but vanilla.
var StudyModes = []string{"vanilla", "rps", "rps+", "rfs", "rfs+"}

// studyPreset is the study's replica sweep (Vasudevan and Harfoush,
// "Accelerated Flow Processing in Kubernetes Overlay Networks"): on a
// Calico VXLAN overlay, 1, 2, 4, 8 and 16 replicas, each one iperf3 client
// container on one host sending 128 KB writes over TCP to its own server
// container on the other; bit rate normalised to the baseline with 95 %
// intervals, per-CPU idle and softirq time. The study ran 30 s per run;
// 5 s keep a sweep affordable here, --duration 30s restores it.
//
// Placement: on its 4-CPU server VM the study left the servers unpinned
// and the NIC interrupt had a core of its own. Here senders and receivers
// share one machine; with 4 or more CPUs the servers spread round robin
// over the CPUs the senders do not use, and on 2 or 3 CPUs they keep the
// bench's default (the senders, and with them the NIC stage, on CPU 0,
// the servers on CPU 1).
func studyPreset(online []int) (map[string]string, error) {
	modes := append(slices.Clone(StudyModes), "falcon")
	p := map[string]string{"layouts": "calico", "modes": strings.Join(modes, ","),
		"workloads": "multi-flow-tcp:128K", "flows": "1,2,4,8,16", "containers": "flows",
		"duration": "5s", "runs": "5"}
	if len(online) >= 4 {
		senders := defaultCPUs(online).sender
		var rest []int
		for _, c := range online {
			if !containsInt(senders, c) {
				rest = append(rest, c)
			}
		}
		p["receiver-cpus"] = cpuset.Format(rest)
	}
	return p, nil
}
