package doctor

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/internal/discover"
)

const (
	sockFlowPath = "/proc/sys/net/core/rps_sock_flow_entries"
	// defaultSockFlow is the RFS table size of the Kubernetes RPS/RFS study
	// and of the kernel's scaling.rst for a moderately loaded server.
	defaultSockFlow = 32768
)

// checkRPS reports the RPS/RFS state of every device on the receive path
// (info), and RFS configured by halves (warn). RFS needs both a per-queue
// flow table (rps_flow_cnt) and the global socket table
// (rps_sock_flow_entries): with only the first, get_rps_cpu finds no socket
// CPU and the flow table is dead weight; with only the second, sockets
// record their CPUs but no queue of the overlay looks them up.
//
// Completing the first case (setting the socket table to the study's 32768)
// is safe: it only activates what the per-queue setting already asks for,
// on the queues that ask. The second is not automated: which devices should
// steer by RFS is a choice ('falcon enable --mode rfs' makes it).
func checkRPS(st *state) []Finding {
	var fs []Finding
	anyFlow := false
	var path []*devState
	for _, d := range st.devs {
		switch d.Role {
		case discover.RoleNIC, discover.RoleOverlay, discover.RoleHostVeth, discover.RoleContainer:
		default:
			continue
		}
		path = append(path, d)
		f := Finding{Check: CheckRPS, Severity: Info, Device: d.Name, Netns: d.Netns}
		if d.sysErr != nil {
			f.Message = fmt.Sprintf("cannot read RPS state: %v", d.sysErr)
			fs = append(fs, f)
			continue
		}
		f.Message = describeQueues(d.queues)
		fs = append(fs, f)
		flow := 0
		for _, q := range d.queues {
			flow += q.flowCnt
		}
		if flow > 0 {
			anyFlow = true
			if st.sockFlowEntries == 0 {
				fs = append(fs, Finding{Check: CheckRFS, Severity: Warn, Device: d.Name, Netns: d.Netns,
					Message: fmt.Sprintf("rps_flow_cnt is set (%d in all) but net.core.rps_sock_flow_entries is 0: "+
						"no socket ever records its CPU, so RFS steers nothing", flow),
					Fix:   fmt.Sprintf("sysctl -w net.core.rps_sock_flow_entries=%d", defaultSockFlow),
					Safe:  true,
					apply: writeProc(sockFlowPath, defaultSockFlow)})
			}
		}
	}
	if st.sockFlowEntries > 0 && !anyFlow && len(path) > 0 {
		var cmds []string
		per := st.sockFlowEntries
		for _, d := range path {
			for _, q := range d.queues {
				cmds = append(cmds, inNS(d.Netns, fmt.Sprintf("sh -c 'echo %d > /sys/class/net/%s/queues/%s/rps_flow_cnt'",
					per/max(1, len(d.queues)), d.Name, q.name)))
			}
		}
		fs = append(fs, Finding{Check: CheckRFS, Severity: Warn,
			Message: fmt.Sprintf("net.core.rps_sock_flow_entries is %d but no queue on the overlay path has rps_flow_cnt: "+
				"RFS is configured and unused here", st.sockFlowEntries),
			Fix: strings.Join(cmds, "; ") + " (or 'falcon enable --mode rfs'), or set net.core.rps_sock_flow_entries=0 if RFS is not wanted"})
	}
	if st.sockFlowEntries < 0 {
		fs = append(fs, Finding{Check: CheckRFS, Severity: Info,
			Message: "net.core.rps_sock_flow_entries is not visible from this network namespace (it lives in the initial one)"})
	}
	return fs
}

func describeQueues(qs []rxQueue) string {
	if len(qs) == 0 {
		return "no rx queues"
	}
	same := true
	for _, q := range qs[1:] {
		if q.cpus != qs[0].cpus || q.flowCnt != qs[0].flowCnt {
			same = false
		}
	}
	if same {
		return fmt.Sprintf("%d rx queue(s): rps_cpus=%s rps_flow_cnt=%d", len(qs), qs[0].cpus, qs[0].flowCnt)
	}
	var parts []string
	for i, q := range qs {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("... %d more", len(qs)-4))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: rps_cpus=%s rps_flow_cnt=%d", q.name, q.cpus, q.flowCnt))
	}
	return strings.Join(parts, "; ")
}
