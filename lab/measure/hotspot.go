package measure

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/lab/probes"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
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
//
// hotspot-tcp is the same over TCP (Fig. 16's TCP panel): iperf3 TCP
// flows of writes of the case's size, each held to --hotspot-rate by -b
// (a packet rate counts full segments, workload.HotspotRate), flow 0 again two
// clients on one 5-tuple. Its series are in Gbit/s only: the server
// reports bytes, and TCP's segments are neither the writes nor, after
// GRO, what the receiver counts. The run's packets/s, loss and
// out-of-order segments are the kernel's counters over the window, as the
// other TCP workloads record them (TcpExt TCPOFOQueue, Run.Reordering).
//
// The same 5-tuple over TCP: iperf3 binds --cport without SO_REUSEADDR,
// so a TIME_WAIT on the client's side would fail the heavy client's bind
// ("Address already in use"; net.ipv4.tcp_tw_reuse does not help, it
// acts on connect, not bind). There is none: iperf3's server closes the
// data streams first, on TEST_END, before the results are exchanged, so
// the TIME_WAIT is the server's, and the heavy client's SYN, with a newer
// timestamp, takes it over (checked on veth between two namespaces, and
// with a TIME_WAIT forced on the client's side, which fails as said). The
// client's socket may still be in LAST_ACK for a moment after the light
// client exits, waiting for the server's last ACK: that is retried, as
// "busy" is.
const (
	hotspotInterval = 100 * time.Millisecond // iperf3's shortest reporting interval
	// hotspotBusyRetries: the heavy client may find the server still
	// closing the light one's test ("the server is busy"), or, over TCP,
	// the light one's socket on --cport not yet gone.
	hotspotBusyRetries = 40
)

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

func init() { drivers[workload.DriverHotspot] = (*env).hotspot }

func (e *env) hotspot(ctx context.Context) (schema.Run, error) {
	tcp := e.w.TCP
	r, err := workload.HotspotRate(e.cfg.HotspotRate, tcp)
	if err != nil {
		return schema.Run{}, err
	}
	bits, _ := r.At(e.cs.Size)
	light := strconv.FormatFloat(math.Round(bits), 'f', 0, 64)
	var t traffic
	for i := 0; i < e.cs.Flows; i++ {
		srv, cl := e.servers[i%len(e.servers)], e.clients[i%len(e.clients)]
		port, i := e.port(5201, i), i
		t.between(srv.Netns, cl.Netns)
		t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
			return workload.StartIperf3IntervalServer(ctx, srv.Netns, port, e.receiverCPU(i), hotspotInterval)
		})
		opts := workload.Iperf3Opts{Netns: cl.Netns, Addr: srv.Addr, Port: port, UDP: !tcp, Size: e.cs.Size,
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
	var ooo, retrans int64
	var clients []hotspotClient
	for _, x := range results {
		c := x.(hotspotClient)
		clients = append(clients, c)
		for _, ph := range c.Phases {
			ooo += ph.Result.OutOfOrder
			retrans += ph.Result.Retransmits
		}
	}
	run.Hotspot = hotspotSeries(clients, run.Started, time.Duration(e.cfg.Warmup), run.WindowS, e.cs.Size, tcp, e.describe())
	if tcp {
		// As the other TCP workloads: segments received after GRO, the
		// senders' retransmitted share, the receiver's out-of-order queue.
		run.PPS = float64(run.Counters["rx.Tcp.InSegs"]) / run.WindowS
		run.LossPct = lossPct(run.Counters["tx.Tcp.OutSegs"], run.Counters["tx.Tcp.OutSegs"]-run.Counters["tx.Tcp.RetransSegs"])
		ooo = run.Counters["rx.TcpExt.TCPOFOQueue"]
		run.Retransmits = &retrans
		run.Gbps = run.Hotspot.WindowGbps()
	} else {
		udpReceived(&run, run.Counters["tx.Udp.OutDatagrams"])
		run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	}
	run.OutOfOrder = &ooo
	return run, nil
}

// lightTime is how long flow 0 stays light: to about the middle of the
// window, counted from its launch (the traffic detection takes about
// probes.TrafficSteady, then the warm-up), in iperf3's whole seconds.
func (e *env) lightTime() time.Duration {
	mid := probes.TrafficSteady + time.Duration(e.cfg.Warmup) + time.Duration(e.cfg.Duration)/2
	return max(mid.Round(time.Second), time.Second)
}

// hotspotRun runs one iperf3 client of a flow, retrying while the server
// is still busy with the flow's previous client, or (TCP) that client's
// socket on --cport is not yet gone.
func hotspotRun(ctx context.Context, o workload.Iperf3Opts, heavy bool) (hotspotPhase, error) {
	ph := hotspotPhase{Heavy: heavy, Bitrate: o.Bitrate}
	var err error
	for try := 0; ; try++ {
		ph.Launched = time.Now()
		ph.Result, err = workload.RunIperf3Series(ctx, o, hotspotInterval)
		if err == nil || try >= hotspotBusyRetries || !hotspotRetry(err) {
			break
		}
		if serr := probes.Wait(ctx, 50*time.Millisecond); serr != nil {
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

// hotspotRetry says whether a client's failure is one the flow's previous
// client left behind for a moment: the server still busy with its test,
// or (TCP) its socket still holding --cport ("unable to connect stream:
// Address already in use").
func hotspotRetry(err error) bool {
	return strings.Contains(err.Error(), "busy") || strings.Contains(err.Error(), "Address already in use")
}

// hotspotSeries lays each flow's intervals on the run's clock (t0: the
// traffic found flowing) and averages them over the window's halves. A
// UDP point's datagrams/s are its bytes in datagrams of size; TCP's have
// none.
func hotspotSeries(clients []hotspotClient, t0 time.Time, warmup time.Duration, windowS float64, size int, tcp bool, endpoints []string) *schema.HotspotRun {
	h := &schema.HotspotRun{Protocol: "UDP", IntervalS: hotspotInterval.Seconds(), WindowStartS: warmup.Seconds(), WindowEndS: warmup.Seconds() + windowS}
	if tcp {
		h.Protocol = "TCP"
	}
	for _, c := range clients {
		if c.Flow == 0 && len(c.Phases) == 2 {
			h.LightEndS = c.Phases[0].Exited.Sub(t0).Seconds()
			h.HeavyAtS = c.Phases[1].Launched.Sub(t0).Seconds()
		}
	}
	for _, c := range clients {
		fs := schema.FlowSeries{Flow: c.Flow, Heavy: c.Flow == 0}
		if c.Flow < len(endpoints) {
			fs.Endpoint = endpoints[c.Flow]
		}
		for _, ph := range c.Phases {
			off := ph.Launched.Sub(t0).Seconds()
			for _, iv := range ph.Result.Intervals {
				if iv.Seconds < h.IntervalS/2 {
					continue // the tail iperf3 reports after its last full interval
				}
				p := schema.SeriesPoint{T: round3(off + iv.End), Gbps: iv.BitsPerSecond / 1e9, LostPct: iv.LostPercent, Heavy: ph.Heavy}
				if !tcp {
					p.PPS = iv.BitsPerSecond / (8 * float64(size))
				}
				fs.Points = append(fs.Points, p)
			}
		}
		var nb, na int
		for _, p := range fs.Points {
			switch {
			case !h.InWindow(p):
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
