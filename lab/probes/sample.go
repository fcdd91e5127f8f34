// Package probes reads what a bench records of a run's window: each CPU's
// time (/proc/stat), the SNMP counters of the applications' namespaces, the
// overlay device's packets, falcon's programs' run-time statistics, each
// receive stage's NET_RX time (stagecost.go) and the TCP order check
// (reorder.go); and what a run waits for before its window: steady traffic
// (traffic.go) and an empty reassembly queue (reassembly.go). It reads;
// lab/measure drives the traffic it reads.
package probes

import (
	"fmt"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
)

// Probes reads the counters of one run's window: the machine's CPUs, the
// SNMP counters of the applications' namespaces, and what the run asked
// for besides.
type Probes struct {
	Testbed *testbed.Testbed
	// RX and TX are the namespaces whose SNMP counters are the receiving
	// and sending applications'.
	RX, TX []string
	// Sent counts what a sender outside any namespace's counters sent
	// (the kernel sender), kept as tx.kernel.frames.
	Sent     func() (int64, error)
	BPFStats bool        // falcon's programs' run-time statistics (--bpf-stats)
	Cost     *StageCost  // with --stage-cost
	Order    *OrderCheck // with --order-check, over a TCP run
}

// Sample is every counter at one end of the window.
type Sample struct {
	At       time.Time
	Counters map[string]int64
	cpu      procfs.Snapshot
	bpf      map[string]datapath.ProgStats // with BPFStats
	cost     stagetrace.CostSnapshot       // with Cost
}

// Window is what the counters say of the window between two samples.
func (p *Probes) Window(before, after Sample) schema.Run {
	run := schema.Run{WindowS: after.At.Sub(before.At).Seconds(),
		CPU: procfs.Window(before.cpu, after.cpu), Counters: map[string]int64{}}
	run.BusyPct = cpuBusy(before.cpu, after.cpu, run.WindowS)
	for k, v := range after.Counters {
		run.Counters[k] = v - before.Counters[k]
	}
	run.BPF = bpfCosts(before.bpf, after.bpf)
	if p.Cost != nil {
		run.Stages = stageCosts(p.Testbed, after.cost.Sub(before.cost))
	}
	// An application sharing its namespace with a VXLAN device (the vxlan
	// layout) sees that device's encapsulated datagrams counted in Udp
	// InDatagrams too: the tunnel socket counts every packet it decaps.
	if ov := run.Counters["rx.overlay.packets"]; ov > 0 {
		run.Counters["rx.Udp.InDatagrams"] = max(0, run.Counters["rx.Udp.InDatagrams"]-ov)
	}
	return run
}

// SoftnetDropped is what the CPUs' backlogs dropped between two samples.
func SoftnetDropped(before, after Sample) uint64 {
	var n uint64
	for _, w := range procfs.Window(before.cpu, after.cpu) {
		n += w.SoftnetDropped
	}
	return n
}

// counterKeys are the SNMP and netstat counters kept per run, for the
// receiving ("rx.") and sending ("tx.") applications' namespaces. The
// TcpExt ones are what reordering cost TCP (TCPReorder says what each
// counts); a counter this kernel lacks reads 0.
var counterKeys = map[string][][2]string{
	"rx": {{"Udp", "InDatagrams"}, {"Udp", "InErrors"}, {"Udp", "RcvbufErrors"}, {"Udp", "NoPorts"},
		{"Tcp", "InSegs"}, {"Tcp", "InErrs"}, {"TcpExt", "TCPOFOQueue"}, {"TcpExt", "TCPOFODrop"}, {"TcpExt", "TCPOFOMerge"}},
	"tx": {{"Udp", "OutDatagrams"}, {"Udp", "SndbufErrors"}, {"Tcp", "OutSegs"}, {"Tcp", "RetransSegs"},
		{"TcpExt", "TCPSACKReorder"}, {"TcpExt", "TCPTSReorder"}, {"TcpExt", "TCPDSACKRecv"}, {"TcpExt", "TCPDSACKOfoRecv"},
		{"TcpExt", "TCPDSACKRecvSegs"}, {"TcpExt", "TCPSpuriousRTOs"}, {"TcpExt", "TCPLostRetransmit"}},
}

// Sample reads every counter now.
func (p *Probes) Sample() (Sample, error) {
	s := Sample{At: time.Now(), Counters: map[string]int64{}}
	var err error
	if s.cpu, err = procfs.TakeSnapshot(); err != nil {
		return s, err
	}
	if p.Cost != nil {
		if s.cost, err = p.Cost.t.Snapshot(); err != nil {
			return s, err
		}
	}
	if p.Order != nil {
		order, err := p.Order.t.Reordering()
		if err != nil {
			return s, err
		}
		for _, o := range order {
			s.Counters["rx.order.segments"] += int64(o.Seen)
			s.Counters["rx.order.reordered"] += int64(o.Reordered)
		}
	}
	if p.BPFStats {
		if s.bpf, err = datapath.ReadProgramStats(); err != nil {
			return s, err
		}
	}
	for role, nss := range map[string][]string{"rx": p.RX, "tx": p.TX} {
		for _, ns := range nss {
			snmp, err := procfs.ReadSNMP(ns)
			if err != nil {
				return s, fmt.Errorf("counters of %s: %w", ns, err)
			}
			for _, k := range counterKeys[role] {
				v := snmp[k[0]][k[1]]
				if k[0] == "Udp" {
					v = snmp.UDP(k[1]) // "Udp" keys count IPv4 and IPv6
				}
				s.Counters[role+"."+k[0]+"."+k[1]] += v
			}
		}
	}
	if p.Sent != nil {
		n, err := p.Sent()
		if err != nil {
			return s, fmt.Errorf("frames the kernel sender sent: %w", err)
		}
		s.Counters["tx.kernel.frames"] = n
	}
	for _, h := range p.Testbed.Hosts {
		if h.Overlay == "" || !slices.Contains(p.RX, h.Netns) {
			continue
		}
		devs, err := readNetDev(h.Netns)
		if err != nil {
			return s, err
		}
		d := devs[h.Overlay]
		s.Counters["rx.overlay.packets"] += int64(d.RxPackets + d.RxDropped)
	}
	return s, nil
}

// bpfCosts is what each falcon program did over the window.
func bpfCosts(before, after map[string]datapath.ProgStats) map[string]schema.BPFCost {
	if len(after) == 0 {
		return nil
	}
	out := map[string]schema.BPFCost{}
	for name, a := range after {
		b := before[name]
		if a.RunCount < b.RunCount || a.RunTime < b.RunTime {
			// The program was detached and loaded again inside the window
			// (falcon stood down and came back): the counters restarted, and
			// only the new instance's runs are known.
			b = datapath.ProgStats{}
		}
		c := schema.BPFCost{Runs: a.RunCount - b.RunCount, TimeNs: uint64(a.RunTime - b.RunTime)}
		if c.Runs > 0 {
			c.NsPerRun = float64(c.TimeNs) / float64(c.Runs)
		}
		out[name] = c
	}
	return out
}

// userHZ is the unit of /proc/stat's times (USER_HZ), 100 on every Linux
// architecture.
const userHZ = 100

// cpuBusy is each CPU's busy share of a window of windowS seconds by the
// clock: 100 − idle − iowait. Without IRQ_TIME_ACCOUNTING (not set on this
// machine's kernel, nor on most distributions') the kernel charges user,
// system, softirq and irq time a whole tick at a time to whatever the CPU
// was doing when the tick came, so CPU's split aliases with a paced
// sender's timer: iperf3 sending 50K datagrams/s in bursts every
// millisecond read 0-1 % busy at HZ 250. On a NO_HZ kernel (CONFIG_NO_HZ_IDLE,
// the default) idle and iowait are kept from the idle loop's own entry and
// exit times instead, so their complement is exact to /proc/stat's 10 ms;
// on other kernels it is as sampled as the rest. nil when the window is
// empty.
func cpuBusy(before, after procfs.Snapshot, windowS float64) map[int]float64 {
	if windowS <= 0 {
		return nil
	}
	out := map[int]float64{}
	for cpu, a := range after.Stat.CPU {
		b, ok := before.Stat.CPU[cpu]
		if !ok || a.Idle < b.Idle || a.IOWait < b.IOWait {
			continue
		}
		idle := float64(a.Idle-b.Idle+a.IOWait-b.IOWait) / userHZ
		out[cpu] = min(max(100*(1-idle/windowS), 0), 100)
	}
	return out
}
