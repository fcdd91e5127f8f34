package bench

import (
	"context"
	"fmt"
	"math"
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

// Rate limits: iperf3 takes -b up to what its 64-bit counters hold, but
// beyond 100 Gbit/s no testbed here sends; below 200 datagrams (or full
// TCP segments) a second the start-of-traffic detection sees gaps, as
// --rate's floor says.
const (
	maxRateBits = 100e9
	maxRatePPS  = 100e6
	minRatePPS  = 200
	tcpMSS      = 1448 // a full segment of the testbed's 1500 B wire, what TCP's floor is counted in
)

// Rate is one --rates entry: a bit rate of payload as iperf3's -b reads it
// ("100M", "1.5G", "800K", "2000000"; K, M and G are decimal, as iperf3's
// rates are), or a packet rate ("400Kpps"), which a case turns into the bit
// rate of its datagrams.
type Rate struct {
	Bits float64 // payload bit/s; 0 when given in packets/s
	PPS  float64 // datagrams/s; 0 when given in bit/s
}

// ParseRate reads a rate.
func ParseRate(s string) (Rate, error) {
	t := strings.TrimSpace(s)
	pps := false
	if u := strings.ToLower(t); strings.HasSuffix(u, "pps") {
		pps, t = true, strings.TrimSpace(t[:len(t)-3])
	} else if strings.HasSuffix(u, "bit/s") || strings.HasSuffix(u, "bps") {
		return Rate{}, fmt.Errorf("bad rate %q (write bit rates as iperf3's -b takes them: 100M, 1G; packet rates with pps: 400Kpps)", s)
	}
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'g', 'G':
			mult = 1e9
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	t = strings.TrimSpace(t)
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || strings.ContainsAny(t, "eEnNxX+-_") || v <= 0 || math.IsInf(v, 0) {
		return Rate{}, fmt.Errorf("bad rate %q (want a bit rate as iperf3's -b takes it, e.g. 100M, 1.5G, or a packet rate, e.g. 400Kpps)", s)
	}
	v *= mult
	if pps {
		if v < minRatePPS || v > maxRatePPS {
			return Rate{}, fmt.Errorf("rate %q out of range: %d .. %s packets/s", s, minRatePPS, formatRate(maxRatePPS))
		}
		return Rate{PPS: math.Round(v)}, nil
	}
	if v < 1e3 || v > maxRateBits {
		return Rate{}, fmt.Errorf("rate %q out of range: 1K .. %s bit/s", s, formatRate(maxRateBits))
	}
	return Rate{Bits: math.Round(v)}, nil
}

// String writes the rate the way ParseRate reads it, in the largest unit
// that keeps it to three decimals: "1G", "1.5G", "400Kpps".
func (r Rate) String() string {
	if r.PPS > 0 {
		return formatRate(r.PPS) + "pps"
	}
	return formatRate(r.Bits)
}

func formatRate(v float64) string {
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "K"}} {
		if v >= u.div && math.Mod(v, u.div/1000) == 0 {
			return strconv.FormatFloat(v/u.div, 'f', -1, 64) + u.unit
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// at is the rate for payloads of size bytes: bit/s and datagrams/s.
func (r Rate) at(size int) (bits, pps float64) {
	if r.PPS > 0 {
		return r.PPS * float64(size) * 8, r.PPS
	}
	return r.Bits, r.Bits / (float64(size) * 8)
}

// parseRates reads --rates: rates in the order given, each once.
func parseRates(s string) ([]string, error) {
	var out []string
	for _, f := range splitList(s) {
		r, err := ParseRate(f)
		if err != nil {
			return nil, err
		}
		out = appendUnique(out, r.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rates given")
	}
	return out, nil
}

// rateWorkload says whether a workload runs at the --rates rates.
func rateWorkload(name string) bool { return name == "rates" || name == "rates-tcp" }

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
	hot, err := ParseRate(f.hotspotRate)
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

// hotspotWorkload says whether a workload is a hotspot (FALCON Fig. 16),
// over UDP or TCP.
func hotspotWorkload(name string) bool { return name == "hotspot" || name == "hotspot-tcp" }

// hotspotRate is the rate a hotspot's light flows are held to: --hotspot-rate
// as given, except that for TCP a packet rate counts full segments of
// tcpMSS bytes (20Kpps is 231.68M), as the wire carries them. A TCP
// flow's writes of the case's size are not its packets (rates-tcp refuses
// packet rates for that reason), and converting at the write size would
// make 20Kpps of 128 KiB writes 21 Gbit/s, no light flow; at full segments
// the TCP flows run at about the packet rate the UDP flows of 1400 B do.
func hotspotRate(spec string, tcp bool) (Rate, error) {
	r, err := ParseRate(spec)
	if err != nil || !tcp || r.PPS == 0 {
		return r, err
	}
	return Rate{Bits: r.PPS * tcpMSS * 8}, nil
}

// caseRates lists the rates a case of workload w at size runs at: the
// config's, checked against the size, for the rates workloads, and one
// "" (no rate) for the others. Hotspot's light rate is checked here too.
func caseRates(c schema.Config, w workloadKind, size int) ([]string, error) {
	if hotspotWorkload(w.name) {
		tcp := w.name == "hotspot-tcp"
		given, err := ParseRate(c.HotspotRate)
		if err == nil {
			r, _ := hotspotRate(c.HotspotRate, tcp)
			if _, err = checkRate(r.String(), "--hotspot-rate", size, tcp); err != nil && r != given {
				err = fmt.Errorf("%v (%s in full segments of %d B)", err, given, tcpMSS)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("workload %s: %v", w.name, err)
		}
	}
	if !rateWorkload(w.name) {
		return []string{""}, nil
	}
	if len(c.Rates) == 0 {
		return nil, fmt.Errorf("workload %s: no --rates to run at", w.name)
	}
	for _, spec := range c.Rates {
		if _, err := checkRate(spec, "--rates", size, w.name == "rates-tcp"); err != nil {
			return nil, fmt.Errorf("workload %s: %v", w.name, err)
		}
	}
	return c.Rates, nil
}

// checkRate reads a rate spec and checks it drives traffic of size bytes
// densely enough to be measured.
func checkRate(spec, flagName string, size int, tcp bool) (Rate, error) {
	r, err := ParseRate(spec)
	if err != nil {
		return r, fmt.Errorf("%s: %v", flagName, err)
	}
	bits, pps := r.at(size)
	switch {
	case tcp && r.PPS > 0:
		return r, fmt.Errorf("%s %s: TCP is held to bit rates (e.g. 500M), not packets/s: its segments are not the application's writes", flagName, spec)
	case tcp && bits/(tcpMSS*8) < minRatePPS:
		return r, fmt.Errorf("%s %s: under %d full TCP segments/s, too sparse to measure (at least %s)", flagName, spec, minRatePPS,
			formatRate(math.Ceil(minRatePPS*tcpMSS*8/1e5)*1e5))
	case !tcp && pps < minRatePPS:
		return r, fmt.Errorf("%s %s: %.0f datagrams/s of %s, too sparse to measure (at least %d/s)", flagName, spec, pps, FormatSize(size), minRatePPS)
	case bits > maxRateBits:
		return r, fmt.Errorf("%s %s: %s is %s bit/s, more than %s", flagName, spec, FormatSize(size), formatRate(math.Round(bits)), formatRate(maxRateBits))
	}
	return r, nil
}

func offered(spec string, size int) *schema.Offered {
	r, err := ParseRate(spec)
	if spec == "" || err != nil {
		return nil
	}
	return offeredAt(spec, r, size)
}

func offeredAt(spec string, r Rate, size int) *schema.Offered {
	bits, pps := r.at(size)
	return &schema.Offered{Spec: spec, BitsPerSecond: math.Round(bits), PacketsPerSecond: pps}
}

// describeCase records in a result what its workload needs said beyond
// the case's size and flows.
func describeCase(res *schema.Result, cs Case, c schema.Config) {
	switch {
	case rateWorkload(cs.Workload):
		res.Offered = offered(cs.Rate, cs.Size)
	case hotspotWorkload(cs.Workload):
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
	r, err := ParseRate(e.cs.Rate)
	if err != nil {
		return schema.Run{}, err
	}
	bits, _ := r.at(e.cs.Size)
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

// workloadLabel names a result's workload in the table: the rates
// workloads with their rate.
func workloadLabel(r schema.Result) string {
	if rateWorkload(r.Workload) && r.Offered != nil {
		return r.Workload + " at " + r.Offered.Spec
	}
	return r.Workload
}

// writeRates lists the rates workloads' cases: offered and delivered rate,
// loss, and the CPU time of all CPUs together (Fig. 19's total CPU and
// softirqs).
func writeRates(b *strings.Builder, f *schema.File) {
	var rows []string
	for _, r := range f.Results {
		if !rateWorkload(r.Workload) || len(r.Runs) == 0 {
			continue
		}
		s := r.Summary
		off := "—"
		if o := r.Offered; o != nil {
			off = fmt.Sprintf("%s (%s bit/s, %s/s)", o.Spec, pmSI(statsOf(o.BitsPerSecond)), pmSI(statsOf(o.PacketsPerSecond)))
		}
		split := fmt.Sprintf("%.0f/%.0f/%.0f/%.0f of %.0f", s["cpu_total_usr"].Mean, s["cpu_total_sys"].Mean, s["cpu_total_soft"].Mean,
			s["cpu_total_irq"].Mean, s["cpu_total_sampled_busy"].Mean)
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Layout, r.Mode, r.Workload,
			FormatSize(r.Size), off, pmSI(s["pps"]), pm(s["gbps"], sigDecimals(s["gbps"].Mean, 3), ""), pm(s["loss_pct"], 2, ""),
			pm(s["cpu_total_busy"], 0, ""), split, pmSI(s["net_rx_per_s"])))
	}
	writeSection(b, rows, "Fixed rates (the rates workloads, FALCON Fig. 19): each flow held to the offered rate by iperf3 (-b); delivered: "+
		"what the receiving application got; CPU: all CPUs' time over the window summed, in % of one CPU (the sending container's CPU "+
		"included: at a fixed rate its work is the same in every mode); busy by the clock (all but the idle loop's time, which NO_HZ kernels "+
		"keep exactly); usr/sys/soft/irq as the kernel samples them at each tick, of their own busy total (without IRQ_TIME_ACCOUNTING "+
		"they alias with a paced sender's timer: read them as shares, not times); NET_RX: softirqs raised per second on all CPUs:",
		"| layout | mode | workload | size | offered | delivered packets/s | delivered Gbit/s | loss % | CPU busy % | sampled usr/sys/soft/irq % | NET_RX/s |\n"+
			"|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
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
