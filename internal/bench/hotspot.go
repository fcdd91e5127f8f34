package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/stats"
	"github.com/falconnet/falcon/internal/workload"
)

// hotspot is FALCON's Fig. 16: several flows at a moderate rate, one of
// which turns heavy half-way, and each flow's throughput over time, so a
// chart shows the hotspot and how the mode reacted to it (the paper:
// two-choice balancing against a static first choice).
//
// --flows iperf3 UDP flows, flow i from the i-th client to the i-th server
// endpoint (round robin over the containers), each held to --hotspot-rate
// (-b). iperf3 cannot change a running client's rate, and a second,
// full-rate client beside the first would be a new flow, which a
// per-flow steering hashes afresh: not the same flow turning heavy. So
// flow 0 is two iperf3 clients one after the other on the same 5-tuple
// (the same server port, and the same client port by --cport): the light
// one until about the middle of the window, then the heavy one, flat out
// (-b 0), to the end. To the kernel and to falcon it is one flow whose
// rate jumps; between the two there is a gap of iperf3's own start (its
// control connection and the UDP handshake, tens of milliseconds), which
// the series shows. iperf3 counts whole seconds (-t), so the switch comes
// at a whole second after flow 0 started, near the middle; where it came
// is recorded (HotspotRun.HeavyAtS).
//
// Every client asks its server for the server's own report
// (--get-server-output), whose intervals of hotspotInterval are what the
// receiver got: the series are received rates, not sent ones.
const (
	hotspotInterval = 100 * time.Millisecond // iperf3's shortest reporting interval
	// hotspotBusyRetries: the heavy client may find the server still
	// closing the light one's test ("the server is busy").
	hotspotBusyRetries = 40
)

// HotspotRun is a hotspot run's time series. Times are seconds since the
// run's traffic was found flowing (Run.Started); the window ran from
// WindowStartS to WindowEndS.
type HotspotRun struct {
	IntervalS    float64 `json:"interval_s"`
	WindowStartS float64 `json:"window_start_s"`
	WindowEndS   float64 `json:"window_end_s"`
	// LightEndS is when flow 0's light client exited, HeavyAtS when its
	// heavy one started.
	LightEndS float64      `json:"light_end_s"`
	HeavyAtS  float64      `json:"heavy_at_s"`
	Flows     []FlowSeries `json:"flows"`
}

// FlowSeries is one flow's received rate, interval by interval.
type FlowSeries struct {
	Flow     int    `json:"flow"`
	Endpoint string `json:"endpoint"`
	// Heavy: the flow that turned heavy (flow 0).
	Heavy  bool          `json:"heavy,omitempty"`
	Points []SeriesPoint `json:"points"`
	// Before and After are the flow's mean received rate over the
	// window's intervals before the switch and after it.
	BeforePPS  float64 `json:"before_pps"`
	AfterPPS   float64 `json:"after_pps"`
	BeforeGbps float64 `json:"before_gbps"`
	AfterGbps  float64 `json:"after_gbps"`
}

// SeriesPoint is one reporting interval of a flow.
type SeriesPoint struct {
	T       float64 `json:"t"` // the interval's end
	Gbps    float64 `json:"gbps"`
	PPS     float64 `json:"pps"`
	LostPct float64 `json:"lost_pct"`
	Heavy   bool    `json:"heavy,omitempty"` // the heavy client's interval
}

// hotspotClient is what one flow's clients reported (Run.Tool): a phase
// per iperf3 client, launched when.
type hotspotClient struct {
	Flow   int            `json:"flow"`
	Phases []hotspotPhase `json:"phases"`
}

type hotspotPhase struct {
	Launched time.Time             `json:"launched"`
	Exited   time.Time             `json:"exited"`
	Heavy    bool                  `json:"heavy,omitempty"`
	Bitrate  string                `json:"bitrate"` // iperf3's -b
	Result   workload.Iperf3Series `json:"result"`
}

func (e *env) hotspot(ctx context.Context) (Run, error) {
	r, err := ParseRate(e.cfg.HotspotRate)
	if err != nil {
		return Run{}, err
	}
	bits, _ := r.at(e.cs.Size)
	light := strconv.FormatFloat(math.Round(bits), 'f', 0, 64)
	var t traffic
	for i := 0; i < e.cs.Flows; i++ {
		srv, cl := e.servers[i%len(e.servers)], e.clients[i%len(e.clients)]
		port, i := e.port(5201, i), i
		t.rx, t.tx = appendUnique(t.rx, srv.Netns), appendUnique(t.tx, cl.Netns)
		t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
			return workload.StartIperf3IntervalServer(ctx, srv.Netns, port, e.receiverCPU(i), hotspotInterval)
		})
		opts := workload.Iperf3Opts{Netns: cl.Netns, Addr: srv.Addr, Port: port, UDP: true, Size: e.cs.Size,
			Duration: e.clientTime(), CPUs: e.senderCPU(i), Bitrate: light}
		if i > 0 {
			t.clients = append(t.clients, func(ctx context.Context) (any, error) {
				ph, err := hotspotRun(ctx, opts, false)
				return hotspotClient{Flow: i, Phases: []hotspotPhase{ph}}, err
			})
			continue
		}
		opts.CPort = e.port(15201, 0)
		t.clients = append(t.clients, func(ctx context.Context) (any, error) {
			start := time.Now()
			lo := opts
			lo.Duration = e.lightTime()
			first, err := hotspotRun(ctx, lo, false)
			if err != nil {
				return nil, err
			}
			hi := opts
			hi.Bitrate = "0"
			// To the end of the clients' time, in whole seconds.
			hi.Duration = max(e.clientTime()-time.Since(start), time.Second)
			second, err := hotspotRun(ctx, hi, true)
			return hotspotClient{Flow: 0, Phases: []hotspotPhase{first, second}}, err
		})
	}
	run, results, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	udpReceived(&run, run.Counters["tx.Udp.OutDatagrams"])
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	var ooo int64
	var clients []hotspotClient
	for _, x := range results {
		c := x.(hotspotClient)
		clients = append(clients, c)
		for _, ph := range c.Phases {
			ooo += ph.Result.OutOfOrder
		}
	}
	run.OutOfOrder = &ooo
	run.Hotspot = hotspotSeries(clients, run.Started, time.Duration(e.cfg.Warmup), run.WindowS, e.cs.Size, e.describe())
	return run, nil
}

// lightTime is how long flow 0 stays light: to about the middle of the
// window, counted from its launch (the traffic detection takes about
// trafficPolls polls, then the warm-up), in iperf3's whole seconds.
func (e *env) lightTime() time.Duration {
	mid := trafficPolls*trafficPoll + time.Duration(e.cfg.Warmup) + time.Duration(e.cfg.Duration)/2
	return max(mid.Round(time.Second), time.Second)
}

// hotspotRun runs one iperf3 client of a flow, retrying while the server
// is still busy with the flow's previous client.
func hotspotRun(ctx context.Context, o workload.Iperf3Opts, heavy bool) (hotspotPhase, error) {
	ph := hotspotPhase{Heavy: heavy, Bitrate: o.Bitrate}
	var err error
	for try := 0; ; try++ {
		ph.Launched = time.Now()
		ph.Result, err = workload.RunIperf3Series(ctx, o, hotspotInterval)
		if err == nil || try >= hotspotBusyRetries || !strings.Contains(err.Error(), "busy") {
			break
		}
		if serr := sleep(ctx, 50*time.Millisecond); serr != nil {
			return ph, serr
		}
	}
	ph.Exited = time.Now()
	if err == nil && !ph.Result.Receiver {
		err = fmt.Errorf("iperf3 brought back no report of the server's, so no received rates (only the sent ones)")
	}
	if err != nil {
		what := "light"
		if heavy {
			what = "heavy"
		}
		return ph, fmt.Errorf("%s client: %w", what, err)
	}
	return ph, nil
}

// hotspotSeries lays each flow's intervals on the run's clock (t0: the
// traffic found flowing) and averages them over the window's halves.
func hotspotSeries(clients []hotspotClient, t0 time.Time, warmup time.Duration, windowS float64, size int, endpoints []string) *HotspotRun {
	h := &HotspotRun{IntervalS: hotspotInterval.Seconds(), WindowStartS: warmup.Seconds(), WindowEndS: warmup.Seconds() + windowS}
	for _, c := range clients {
		if c.Flow == 0 && len(c.Phases) == 2 {
			h.LightEndS = c.Phases[0].Exited.Sub(t0).Seconds()
			h.HeavyAtS = c.Phases[1].Launched.Sub(t0).Seconds()
		}
	}
	for _, c := range clients {
		fs := FlowSeries{Flow: c.Flow, Heavy: c.Flow == 0}
		if c.Flow < len(endpoints) {
			fs.Endpoint = endpoints[c.Flow]
		}
		for _, ph := range c.Phases {
			off := ph.Launched.Sub(t0).Seconds()
			for _, iv := range ph.Result.Intervals {
				if iv.Seconds < h.IntervalS/2 {
					continue // the tail iperf3 reports after its last full interval
				}
				fs.Points = append(fs.Points, SeriesPoint{T: round3(off + iv.End), Gbps: iv.BitsPerSecond / 1e9,
					PPS: iv.BitsPerSecond / (8 * float64(size)), LostPct: iv.LostPercent, Heavy: ph.Heavy})
			}
		}
		var nb, na int
		for _, p := range fs.Points {
			switch {
			case p.T-h.IntervalS < h.WindowStartS || p.T > h.WindowEndS:
				// outside the window
			case p.T <= h.HeavyAtS:
				fs.BeforePPS, fs.BeforeGbps, nb = fs.BeforePPS+p.PPS, fs.BeforeGbps+p.Gbps, nb+1
			case p.T-h.IntervalS >= h.HeavyAtS:
				fs.AfterPPS, fs.AfterGbps, na = fs.AfterPPS+p.PPS, fs.AfterGbps+p.Gbps, na+1
			}
		}
		if nb > 0 {
			fs.BeforePPS, fs.BeforeGbps = fs.BeforePPS/float64(nb), fs.BeforeGbps/float64(nb)
		}
		if na > 0 {
			fs.AfterPPS, fs.AfterGbps = fs.AfterPPS/float64(na), fs.AfterGbps/float64(na)
		}
		h.Flows = append(h.Flows, fs)
	}
	return h
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// hotspotMetrics: the flows' received rates before and after the switch,
// the heavy flow's and the light ones' apart.
func hotspotMetrics(r Run, m map[string]float64) {
	h := r.Hotspot
	if h == nil {
		return
	}
	var lightBefore, lightAfter, heavyBefore, heavyAfter float64
	for _, f := range h.Flows {
		if f.Heavy {
			heavyBefore, heavyAfter = heavyBefore+f.BeforePPS, heavyAfter+f.AfterPPS
		} else {
			lightBefore, lightAfter = lightBefore+f.BeforePPS, lightAfter+f.AfterPPS
		}
	}
	m["hotspot_heavy_before_pps"], m["hotspot_heavy_after_pps"] = heavyBefore, heavyAfter
	m["hotspot_light_before_pps"], m["hotspot_light_after_pps"] = lightBefore, lightAfter
	m["hotspot_after_pps"] = heavyAfter + lightAfter
}

// writeHotspot lists each hotspot case's rates before and after flow 0
// turned heavy; the series are in the results file.
func writeHotspot(b *strings.Builder, f *File) {
	var rows []string
	for _, r := range f.Results {
		if r.Workload != "hotspot" || len(r.Runs) == 0 {
			continue
		}
		s := r.Summary
		var at []float64
		for _, run := range r.Runs {
			if h := run.Hotspot; h != nil {
				at = append(at, h.HeavyAtS-h.WindowStartS)
			}
		}
		light := "—"
		if r.Offered != nil {
			light = r.Offered.Spec
		}
		arrow := func(before, after string) string { return pmSI(s[before]) + " → " + pmSI(s[after]) }
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", r.Layout, r.Mode, FormatSize(r.Size), r.Flows, light,
			pm(stats.Summarize(at), 2, " s"), arrow("hotspot_heavy_before_pps", "hotspot_heavy_after_pps"),
			arrow("hotspot_light_before_pps", "hotspot_light_after_pps"), pmSI(s["hotspot_after_pps"])))
	}
	writeSection(b, rows, "Hotspot (FALCON Fig. 16): flow 0 light, then flat out on the same 5-tuple from the switch on; "+
		"datagrams/s the receiver got, mean over the window's intervals before and after the switch (each flow's series, "+
		"every 0.1 s, is in the results file):",
		"| layout | mode | size | flows | light rate | switch (into the window) | heavy flow before → after | light flows before → after | all flows after |\n"+
			"|---|---|---:|---:|---|---:|---:|---:|---:|")
}
