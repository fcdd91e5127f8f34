package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// The rates workloads (FALCON Fig. 19: UDP and TCP at fixed rates, total
// CPU and softirqs): one iperf3 flow held to each rate of --rates by
// iperf3's own pacing (-b), so that every mode carries the same offered
// load and what differs between them is what receiving it cost. Each rate
// is a case of its own (Case.Rate, Result.Offered); a run records the
// delivered rate, the loss and, as every run does, each CPU's usr, sys,
// softirq and irq time over the window from /proc/stat (Run.CPU), which
// Metrics sums into cpu_total_*.
//
// On one machine the sending container's CPU is in those totals too; at a
// fixed rate the sender's work is the same in every mode, so a difference
// between modes is the receiving side's.

// DefaultRates is --rates when it is not given.
const DefaultRates = "100M,500M,1G,2G"

// parseRates reads --rates: rates in the order given, each once.
func parseRates(s string) ([]string, error) {
	var out []string
	for _, f := range splitList(s) {
		r, err := workload.ParseRate(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, r.String()) {
			out = append(out, r.String())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rates given")
	}
	return out, nil
}

// usesWorkload says whether any --workloads entry is one of names.
func usesWorkload(c schema.Config, names ...string) bool {
	for _, entry := range c.Workloads {
		name, _, _ := strings.Cut(entry, ":")
		if contains(names, name) {
			return true
		}
	}
	return false
}

// resolveRates checks --rates and --hotspot-rate, and keeps each in the
// config where a workload runs at it (so a config without those workloads
// reads as before they existed).
func (f *Flags) resolveRates(c *schema.Config) error {
	rates, err := parseRates(f.rates)
	if err != nil {
		return configErrorf("--rates: %v", err)
	}
	hot, err := workload.ParseRate(f.hotspotRate)
	if err != nil {
		return configErrorf("--hotspot-rate: %v", err)
	}
	if usesWorkload(*c, "rates", "rates-tcp") {
		c.Rates = rates
	}
	if usesWorkload(*c, "hotspot", "hotspot-tcp") {
		c.HotspotRate = hot.String()
	}
	return nil
}

// hotspotRate is the rate a hotspot's light flows are held to: --hotspot-rate
// as given, except that for TCP a packet rate counts full segments of
// tcpMSS bytes (20Kpps is 231.68M), as the wire carries them. A TCP
// flow's writes of the case's size are not its packets (rates-tcp refuses
// packet rates for that reason), and converting at the write size would
// make 20Kpps of 128 KiB writes 21 Gbit/s, no light flow; at full segments
// the TCP flows run at about the packet rate the UDP flows of 1400 B do.
func hotspotRate(spec string, tcp bool) (workload.Rate, error) {
	r, err := workload.ParseRate(spec)
	if err != nil || !tcp || r.PPS == 0 {
		return r, err
	}
	return workload.Rate{Bits: r.PPS * workload.TCPMSS * 8}, nil
}

// caseRates lists the rates a case of workload w at size runs at: the
// config's, checked against the size, for the rates workloads, and one
// "" (no rate) for the others. Hotspot's light rate is checked here too.
func caseRates(c schema.Config, w workload.Kind, size int) ([]string, error) {
	if workload.IsHotspot(w.Name) {
		tcp := w.Name == "hotspot-tcp"
		given, err := workload.ParseRate(c.HotspotRate)
		if err == nil {
			r, _ := hotspotRate(c.HotspotRate, tcp)
			if _, err = checkRate(r.String(), "--hotspot-rate", size, tcp); err != nil && r != given {
				err = fmt.Errorf("%v (%s in full segments of %d B)", err, given, workload.TCPMSS)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("workload %s: %v", w.Name, err)
		}
	}
	if !workload.IsRates(w.Name) {
		return []string{""}, nil
	}
	if len(c.Rates) == 0 {
		return nil, fmt.Errorf("workload %s: no --rates to run at", w.Name)
	}
	for _, spec := range c.Rates {
		if _, err := checkRate(spec, "--rates", size, w.Name == "rates-tcp"); err != nil {
			return nil, fmt.Errorf("workload %s: %v", w.Name, err)
		}
	}
	return c.Rates, nil
}

// checkRate reads a rate spec and checks it drives traffic of size bytes
// densely enough to be measured.
func checkRate(spec, flagName string, size int, tcp bool) (workload.Rate, error) {
	r, err := workload.ParseRate(spec)
	if err != nil {
		return r, fmt.Errorf("%s: %v", flagName, err)
	}
	bits, pps := r.At(size)
	switch {
	case tcp && r.PPS > 0:
		return r, fmt.Errorf("%s %s: TCP is held to bit rates (e.g. 500M), not packets/s: its segments are not the application's writes", flagName, spec)
	case tcp && bits/(workload.TCPMSS*8) < workload.MinRatePPS:
		return r, fmt.Errorf("%s %s: under %d full TCP segments/s, too sparse to measure (at least %s)", flagName, spec, workload.MinRatePPS,
			workload.FormatRate(math.Ceil(workload.MinRatePPS*workload.TCPMSS*8/1e5)*1e5))
	case !tcp && pps < workload.MinRatePPS:
		return r, fmt.Errorf("%s %s: %.0f datagrams/s of %s, too sparse to measure (at least %d/s)", flagName, spec, pps, workload.FormatSize(size), workload.MinRatePPS)
	case bits > workload.MaxRateBits:
		return r, fmt.Errorf("%s %s: %s is %s bit/s, more than %s", flagName, spec, workload.FormatSize(size), workload.FormatRate(math.Round(bits)), workload.FormatRate(workload.MaxRateBits))
	}
	return r, nil
}

func offered(spec string, size int) *schema.Offered {
	r, err := workload.ParseRate(spec)
	if spec == "" || err != nil {
		return nil
	}
	return offeredAt(spec, r, size)
}

func offeredAt(spec string, r workload.Rate, size int) *schema.Offered {
	bits, pps := r.At(size)
	return &schema.Offered{Spec: spec, BitsPerSecond: math.Round(bits), PacketsPerSecond: pps}
}

// describeCase records in a result what its workload needs said beyond
// the case's size and flows.
func describeCase(res *schema.Result, cs Case, c schema.Config) {
	switch {
	case workload.IsRates(cs.Workload):
		res.Offered = offered(cs.Rate, cs.Size)
	case workload.IsHotspot(cs.Workload):
		if r, err := hotspotRate(c.HotspotRate, cs.Workload == "hotspot-tcp"); err == nil && c.HotspotRate != "" {
			res.Offered = offeredAt(c.HotspotRate, r, cs.Size)
		}
	}
}

// rates: one iperf3 flow, UDP (rates) or TCP (rates-tcp), held to the
// case's rate. Packets/s are the receiver's datagrams (TCP: segments after
// GRO) over the window, Gbit/s iperf3's receiver rate; loss as udp and tcp
// count it.
func (e *env) rates(ctx context.Context) (schema.Run, error) {
	udp := e.cs.Workload == "rates"
	r, err := workload.ParseRate(e.cs.Rate)
	if err != nil {
		return schema.Run{}, err
	}
	bits, _ := r.At(e.cs.Size)
	srv, cl := e.servers[0], e.clients[0]
	port := e.port(5201, 0)
	t := traffic{rx: []string{srv.Netns}, tx: []string{cl.Netns}}
	t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
		return workload.StartIperf3Server(ctx, srv.Netns, port, e.receiverCPU(0))
	})
	opts := workload.Iperf3Opts{Netns: cl.Netns, Addr: srv.Addr, Port: port, UDP: udp, Size: e.cs.Size,
		Duration: e.clientTime(), CPUs: e.senderCPU(0), Bitrate: strconv.FormatFloat(math.Round(bits), 'f', 0, 64)}
	t.clients = append(t.clients, func(ctx context.Context) (any, error) { return workload.RunIperf3(ctx, opts) })
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	res := results[0].(workload.Iperf3Result)
	run.Gbps = res.BitsPerSecond / 1e9
	if udp {
		udpReceived(&run, run.Counters["tx.Udp.OutDatagrams"])
		ooo := res.OutOfOrder
		run.OutOfOrder = &ooo
		return run, nil
	}
	run.PPS = float64(run.Counters["rx.Tcp.InSegs"]) / run.WindowS
	run.LossPct = lossPct(run.Counters["tx.Tcp.OutSegs"], run.Counters["tx.Tcp.OutSegs"]-run.Counters["tx.Tcp.RetransSegs"])
	ooo, retrans := run.Counters["rx.TcpExt.TCPOFOQueue"], res.Retransmits
	run.OutOfOrder, run.Retransmits = &ooo, &retrans
	return run, nil
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
