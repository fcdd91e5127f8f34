package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand"
	"net/netip"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/loadavg"
	"github.com/falconnet/falcon/internal/steer"
	"github.com/falconnet/falcon/lab/schema"
)

// Setup is one simulated case.
type Setup struct {
	CPUs  int // cores of the machine
	Place Placement
	Mode  Mode
	Flows int
	Size  int
	// Rate is the offered load in datagrams/s over all flows, arriving at
	// the NIC from a remote sender (Poisson). 0: the senders run on
	// Place.Sender as threads and send as fast as their CPU lets them, as
	// iperf3 -b 0 does on one machine.
	Rate     float64
	Duration time.Duration // measured, after Warmup
	Warmup   time.Duration
	Seed     int64
	// Engaged is the adaptive policy's engagement (the agent's test that
	// steering pays; not engaged, it stands down and takes its programs off
	// the path); Run tries both when nil and keeps the better, as the
	// agent's test would.
	Engaged *bool
}

// Outcome is what a case delivered in its measured window.
type Outcome struct {
	SentPPS float64 `json:"sent_pps"`
	PPS     float64 `json:"pps"` // datagrams/s the applications received
	LossPct float64 `json:"loss_pct"`
	// P50Us and P99Us are one way: from the send (or the arrival at the
	// NIC) to the application.
	P50Us     float64         `json:"p50_us"`
	P99Us     float64         `json:"p99_us"`
	Busy      map[int]float64 `json:"busy_pct"`
	Reordered int64           `json:"reordered"` // datagrams delivered after a later one of their flow
	Engaged   bool            `json:"engaged,omitempty"`
}

// Validate rejects a setup the model cannot run, before it runs.
func (s Setup) Validate() error {
	switch {
	case s.CPUs < 1:
		return fmt.Errorf("cores %d: want at least 1", s.CPUs)
	case s.CPUs > 1024:
		return fmt.Errorf("cores %d: want at most 1024", s.CPUs)
	case s.Flows < 1:
		return fmt.Errorf("flows %d: want at least 1", s.Flows)
	case s.Rate < 0 || math.IsNaN(s.Rate):
		return fmt.Errorf("rate %v: want 0 (saturate) or datagrams/s", s.Rate)
	case s.Rate == 0 && len(s.Place.Sender) == 0:
		return fmt.Errorf("no offered rate and no sender CPUs: nothing sends")
	case s.Duration <= 0:
		return fmt.Errorf("duration %v: want > 0", s.Duration)
	}
	in := func(c int) bool { return c >= 0 && c < s.CPUs }
	for _, set := range [][]int{s.Place.Sender, s.Place.Receiver, s.Place.Falcon} {
		for _, c := range set {
			if !in(c) {
				return fmt.Errorf("CPU %d: the machine has %d cores", c, s.CPUs)
			}
		}
	}
	if len(s.Place.Receiver) == 0 {
		return fmt.Errorf("no receiver CPUs")
	}
	if s.Place.NIC >= s.CPUs {
		return fmt.Errorf("NIC CPU %d: the machine has %d cores", s.Place.NIC, s.CPUs)
	}
	for _, c := range append(slices.Clone(s.Mode.Opts.CPUs), s.Mode.Opts.SplitCPUs...) {
		if !in(c) {
			return fmt.Errorf("mode %s: CPU %d: the machine has %d cores", s.Mode.Spec, c, s.CPUs)
		}
	}
	return nil
}

// Run simulates one case with costs c.
func Run(s Setup, c Costs) (Outcome, error) {
	if err := s.Validate(); err != nil {
		return Outcome{}, err
	}
	if !s.Mode.falcon() || s.Mode.Opts.Policy != datapath.PolicyAdaptive {
		return newWorld(s, c, false).run(), nil
	}
	// Not engaged, the agent stands down: its programs leave the path,
	// and the host runs as vanilla does.
	standDown := s
	standDown.Mode, _ = ParseMode(schema.Vanilla)
	switch {
	case s.Engaged != nil && *s.Engaged:
		return newWorld(s, c, true).run(), nil
	case s.Engaged != nil:
		return newWorld(standDown, c, false).run(), nil
	}
	on, off := newWorld(s, c, true).run(), newWorld(standDown, c, false).run()
	if on.PPS > off.PPS {
		return on, nil
	}
	return off, nil
}

// The limits the kernel puts on queues the model keeps.
const (
	wireRing    = 256    // a veth's receive ring (VETH_RING_SIZE): the NIC's frames
	maxBacklog  = 1000   // net.core.netdev_max_backlog: a CPU's backlog
	rcvbuf      = 212992 // net.core.rmem_default: a socket's receive buffer
	softirqSpan = 2e6    // ns: net_rx_action's time limit before ksoftirqd takes over
	sampleEvery = float64(loadavg.DefaultInterval)
)

// stages of a packet on the receiving host, each one queued item of
// softirq work on some CPU.
const (
	stXDP       = iota // the split's XDP program, on the interrupt CPU
	stBuild            // the NIC's poll: skb, GRO (on a cpumap CPU with the split)
	stNIC              // IP, UDP, VXLAN decapsulation; falcon's NIC hook
	stVXLAN            // the VXLAN device: inner GRO, bridge, veth; falcon's overlay hook
	stContainer        // the container's eth0: IP, UDP, socket queue
	nStages
)

// napiBudget is how many packets one NAPI instance handles before the
// softirq turns to the next (the backlog's weight_p, a driver's budget).
// Each stage queue of a CPU stands for one NAPI instance: the wire's
// ring, the gro_cell, the backlog. Their rounds are what lets a flow's
// packets between two hooks drain, which the ordering guard waits for.
const napiBudget = 64

type packet struct {
	f    *flow
	born float64
	seq  uint64
}

type item struct {
	p     *packet
	stage int
	cost  float64
}

type flow struct {
	id   int
	hash uint32 // falcon's FlowHash of the inner 5-tuple
	// skbHash is the kernel's hash of the outer packet, random per boot
	// and flow: RPS's and RFS's. It is an L4 hash, which decapsulation,
	// the bridge and veth keep, so every device sees the same.
	skbHash    uint32
	appCPU     int
	sendCPU    int
	nextSeq    uint64
	lastSeq    uint64
	sock       []*packet
	guard      [3]*steer.Entry // the split hook, the NIC's hook, the VXLAN device's hook
	arrived    [3]uint64       // arrivals at the stage after each hook
	lastArrive [3]float64
}

type thread struct {
	sender bool
	hot    bool // an application whose last read left datagrams queued
	f      *flow
	vrun   float64
}

type cpu struct {
	id        int
	q         [nStages][]item
	queued    int
	turn      int     // the stage queue being polled
	left      int     // of its budget
	txShare   float64 // hand-over work owed before the next item
	ring      int     // items in the wire's ring (this CPU polls the NIC)
	backlog   int
	threads   []*thread
	running   bool
	streak    float64 // softirq time since its queues were last empty
	ksoftirqd bool    // the softirq has run too long with a thread waiting
	softV     float64 // ksoftirqd's vruntime
	busy      float64 // busy ns since the last sample
	busyWin   float64 // busy ns in the measured window
	load      float64 // the agent's smoothed load, percent
	sampled   bool
	cur       *thread
	curItem   item
	curStart  float64
}

type event struct {
	t    float64
	kind int // evCPU, evArrive, evSample
	cpu  *cpu
	f    *flow
}

const (
	evCPU = iota
	evArrive
	evSample
)

type events []event

func (e events) Len() int           { return len(e) }
func (e events) Less(i, j int) bool { return e[i].t < e[j].t }
func (e events) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)        { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

type world struct {
	s       Setup
	c       Costs
	engaged bool
	rng     *rand.Rand
	cpus    []*cpu
	flows   []*flow
	ev      events
	now     float64
	start   float64 // the measured window's
	end     float64
	falconS []int // the Falcon set
	splitS  []int
	loads   []uint32
	avg     uint32
	sockCap int
	rpsS    []int

	sent, delivered, dropped int64
	reordered                int64
	lat                      []float64
}

func newWorld(s Setup, c Costs, engaged bool) *world {
	w := &world{s: s, c: c, engaged: engaged, rng: rand.New(rand.NewSource(s.Seed))}
	for i := 0; i < s.CPUs; i++ {
		w.cpus = append(w.cpus, &cpu{id: i})
	}
	all := make([]int, s.CPUs)
	for i := range all {
		all[i] = i
	}
	w.falconS = s.Mode.Opts.CPUs
	if len(w.falconS) == 0 {
		w.falconS = s.Place.Falcon
	}
	if len(w.falconS) == 0 {
		w.falconS = all
	}
	w.splitS = s.Mode.Opts.SplitCPUs
	if len(w.splitS) == 0 {
		w.splitS = w.falconS
	}
	w.rpsS = s.Mode.Opts.RPSCPUs
	if len(w.rpsS) == 0 {
		w.rpsS = s.Place.Falcon
	}
	if len(w.rpsS) == 0 {
		w.rpsS = all
	}
	w.loads = make([]uint32, s.CPUs)
	w.sockCap = rcvbuf / truesize(s.Size)
	for i := 0; i < s.Flows; i++ {
		src := netip.AddrFrom4([4]byte{10, 1, 0, 2})
		dst := netip.AddrFrom4([4]byte{10, 1, 0, 3})
		f := &flow{id: i, hash: steer.FlowHash(17, src, dst, uint16(40000+w.rng.Intn(20000)), uint16(5201+i)),
			skbHash: w.rng.Uint32() | 1,
			appCPU:  s.Place.Receiver[i%len(s.Place.Receiver)]}
		w.flows = append(w.flows, f)
		w.cpus[f.appCPU].threads = append(w.cpus[f.appCPU].threads, &thread{f: f})
		if s.Rate == 0 {
			f.sendCPU = s.Place.Sender[i%len(s.Place.Sender)]
			w.cpus[f.sendCPU].threads = append(w.cpus[f.sendCPU].threads, &thread{sender: true, f: f})
		} else if len(s.Place.Sender) > 0 && s.Place.NIC < 0 {
			f.sendCPU = s.Place.Sender[i%len(s.Place.Sender)]
		}
	}
	w.start = float64(s.Warmup.Nanoseconds())
	w.end = w.start + float64(s.Duration.Nanoseconds())
	return w
}

// truesize is what one datagram charges the socket's receive buffer: the
// payload and headers in a power-of-two slab, and the sk_buff.
func truesize(size int) int {
	n := 1
	for n < size+320 {
		n <<= 1
	}
	return n + 256
}

func (w *world) push(e event) { heap.Push(&w.ev, e) }

func (w *world) run() Outcome {
	w.push(event{t: sampleEvery, kind: evSample})
	if w.s.Rate > 0 {
		for _, f := range w.flows {
			w.push(event{t: w.gap(), kind: evArrive, f: f})
		}
	}
	for _, c := range w.cpus {
		w.dispatch(c)
	}
	for len(w.ev) > 0 {
		e := heap.Pop(&w.ev).(event)
		if e.t > w.end {
			break
		}
		w.now = e.t
		switch e.kind {
		case evCPU:
			w.finish(e.cpu)
			w.dispatch(e.cpu)
		case evArrive:
			w.arrive(e.f, w.now)
			w.push(event{t: w.now + w.gap(), kind: evArrive, f: e.f})
		case evSample:
			w.sample()
			w.push(event{t: w.now + sampleEvery, kind: evSample})
		}
	}
	return w.outcome()
}

// gap is a remote sender's time between two datagrams of one flow.
func (w *world) gap() float64 {
	return w.rng.ExpFloat64() * 1e9 * float64(w.s.Flows) / w.s.Rate
}

func (w *world) measuring() bool { return w.now >= w.start && w.now < w.end }

// irqCPU is the CPU that polls the NIC for a flow: the NIC CPU, or with
// none the CPU whose send woke the wire's poll.
func (w *world) irqCPU(f *flow) int {
	if w.s.Place.NIC >= 0 {
		return w.s.Place.NIC
	}
	return f.sendCPU
}

// arrive puts a datagram on the wire into the receiving NIC.
func (w *world) arrive(f *flow, born float64) {
	f.nextSeq++
	p := &packet{f: f, born: born, seq: f.nextSeq}
	if w.measuring() {
		w.sent++
	}
	c := w.cpus[w.irqCPU(f)]
	it := item{p: p, stage: stBuild, cost: w.c.Build}
	if w.split() {
		it.stage, it.cost = stXDP, w.c.XDP
	}
	w.queue(c, it)
}

// queue adds an item to its stage's queue on c, or drops it where the
// kernel would: the wire's ring holds 256 frames, the split's cpumap
// queue CPUMapQueue, a gro_cell and a backlog netdev_max_backlog.
func (w *world) queue(c *cpu, it item) {
	limit := maxBacklog
	switch {
	case it.stage == stXDP || it.stage == stBuild && !w.split():
		limit = wireRing
	case it.stage == stBuild:
		limit = datapath.CPUMapQueue
	}
	if len(c.q[it.stage]) >= limit {
		w.drop()
		return
	}
	c.q[it.stage] = append(c.q[it.stage], it)
	c.queued++
	w.dispatch(c)
}

func (w *world) split() bool { return w.s.Mode.falcon() && w.s.Mode.Opts.Split }

func (w *world) drop() {
	if w.measuring() {
		w.dropped++
	}
}

func (w *world) runnable(c *cpu) []*thread {
	var out []*thread
	for _, t := range c.threads {
		if t.sender && (w.s.Rate == 0) || !t.sender && len(t.f.sock) > 0 {
			out = append(out, t)
		}
	}
	return out
}
