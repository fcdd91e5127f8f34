package agent

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/falconnet/falcon/internal/cause"
	"github.com/falconnet/falcon/internal/datapath"
)

// Deciding by cause (internal/cause): at every turn of the engagement
// loop the agent reads, cheaply, which CPU the packet work saturates,
// where the receiving applications and the NIC's stage run, and what the
// containers received, and a cause.Machine says whether to engage, on
// which CPUs, and whether the engagement made the bottleneck's packets
// cheaper. Where the causes cannot be read (no visible process holds the
// containers' sockets: another PID namespace; /proc unreadable), the turn
// falls back on the A/B test (engage.go). Measured on 2 vCPUs with two
// container namespaces: a turn costs about 0.13 ms of CPU stood down
// (the per-CPU files 0.02–0.04 ms, cause.BenchmarkRead; each namespace's
// counters 0.05 ms, cause.BenchmarkReceived) and 0.29 ms on the path (the
// datapath's counters, for the NIC's CPU, 0.16 ms): 0.1–0.2 % of one CPU
// at a turn every 150 ms. Listing the sockets costs about 0.75 ms every
// 2 s.

// CauseRecord is one turn: what the agent read, and what it decided.
type CauseRecord struct {
	Seq    uint64       `json:"seq"`
	At     time.Time    `json:"at"`
	Window cause.Window `json:"window"`
	Step   cause.Step   `json:"step"`
}

// causeKeep: the turns kept for bench and status, about 5 minutes.
const causeKeep = 2000

// causeLog keeps the latest turns.
type causeLog struct {
	mu     sync.Mutex
	ring   []CauseRecord
	seq    uint64
	counts CauseCounts
}

// CauseCounts are the turns decided by cause so far: by verdict (engage,
// inline: stay off or inline, unreadable: the A/B test decides), the
// engagements begun, and the confirmations that found them paying or not.
type CauseCounts struct {
	Engage, Inline, Unreadable uint64
	Begun, Pays, Fails         uint64
	// Params: the policy's settings the turns were decided with.
	Params cause.Params
	// Last: the latest turn (Seq 0 before the first).
	Last CauseRecord
}

func (l *causeLog) add(p cause.Params, r CauseRecord) CauseRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts.Params = p
	l.seq++
	r.Seq = l.seq
	c, s := &l.counts, r.Step
	switch {
	case s.Fallback:
		c.Unreadable++
	case s.Verdict.Engage:
		c.Engage++
	default:
		c.Inline++
	}
	if s.Action == cause.ActBegin {
		c.Begun++
	}
	if s.Confirm != nil && s.Confirm.Outcome == cause.Pays {
		c.Pays++
	}
	if s.Confirm != nil && s.Confirm.Outcome == cause.Fails {
		c.Fails++
	}
	c.Last = r
	if len(l.ring) >= causeKeep {
		l.ring = slices.Delete(l.ring, 0, len(l.ring)-causeKeep+1)
	}
	l.ring = append(l.ring, r)
	return r
}

// since returns the turns after seq (those still kept), and the last seq.
func (l *causeLog) since(seq uint64) ([]CauseRecord, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []CauseRecord
	for _, r := range l.ring {
		if r.Seq > seq {
			out = append(out, r)
		}
	}
	return out, l.seq
}

func (l *causeLog) snapshot() CauseCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts
}

// CauseTrace returns the turns decided by cause after seq that the agent
// still keeps (about the last 5 minutes); nil for a mode without them.
func (a *Agent) CauseTrace(seq uint64) []CauseRecord {
	m, ok := a.mode.(*falconMode)
	if !ok {
		return nil
	}
	out, _ := m.causes.since(seq)
	return out
}

// causeReader turns the kernel's counters into cause.Windows.
type causeReader struct {
	cpus  cause.Reader
	apps  cause.Apps
	recv  cause.Received
	nss   []string       // the namespaces counted at the last turn
	last  [2]uint64      // what they had received, and dropped, then
	nic   map[int]uint64 // CPU -> packets the NIC hooks saw there
	start bool
	// flowing: the last window had traffic (cause.Traffic).
	flowing bool
}

// read returns the window since the last read; false on the first.
func (c *causeReader) read(m *falconMode) (cause.Window, bool) {
	cpus, ms, err := c.cpus.Read()
	if err != nil {
		return cause.Window{Ms: ms, Unreadable: err.Error()}, c.started()
	}
	w := cause.Window{Ms: ms, CPUs: cpus, Engaged: m.dp.Config().Engaged && !m.dp.Config().StoodDown}
	nss := m.containerNetns()
	if w.Delivered, w.SockDrops, err = c.received(nss); err != nil {
		w.Unreadable = err.Error()
	} else {
		if cause.Traffic(w) && !c.flowing {
			// A flow began: its socket may be newer than the last
			// listing, and its receiver is not known without it.
			c.apps.Relist()
		}
		if w.AppCPUs, err = c.apps.CPUs(nss); err != nil {
			w.Unreadable = err.Error()
		}
		w.Listed, w.NewSockets = c.apps.Fresh()
	}
	c.flowing = cause.Traffic(w)
	w.NICCPUs = c.nicCPUs(m, cpus)
	return w, c.started() && cpus != nil
}

func (c *causeReader) started() bool {
	was := c.start
	c.start = true
	return was
}

// received: what the namespaces' sockets received since the last turn
// (cause.Received); nothing where the namespaces changed.
func (c *causeReader) received(nss []string) (delivered, drops uint64, err error) {
	p, d, err := c.recv.Counts(nss)
	if err != nil {
		return 0, 0, err
	}
	same, prev := slices.Equal(nss, c.nss), c.last
	c.nss, c.last = slices.Clone(nss), [2]uint64{p, d}
	if !same {
		return 0, 0, nil
	}
	return sub(prev[0], p), sub(prev[1], d), nil
}

// nicCPUs: on the path, the CPUs where the NIC hooks saw a quarter or more
// of the busiest one's packets; stood down (or with no NIC hook), the
// CPUs that ran NET_RX most.
func (c *causeReader) nicCPUs(m *falconMode, cpus []cause.CPU) []int {
	prev := c.nic
	c.nic = nil
	if m.dp.Config().StoodDown {
		return cause.NICByNetRx(cpus)
	}
	cnt, err := m.dp.Counters()
	if err != nil {
		return cause.NICByNetRx(cpus)
	}
	c.nic = map[int]uint64{}
	for _, s := range cnt.Stages {
		if s.Hook.Role == datapath.HookOnNIC {
			for cpu, n := range s.RanOn {
				c.nic[cpu] += n
			}
		}
	}
	d := map[int]uint64{}
	var top uint64
	for cpu, n := range c.nic {
		d[cpu] = sub(prev[cpu], n)
		top = max(top, d[cpu])
	}
	if prev == nil || top == 0 {
		return cause.NICByNetRx(cpus)
	}
	out := []int{}
	for cpu, n := range d {
		if 4*n >= top {
			out = append(out, cpu)
		}
	}
	slices.Sort(out)
	return out
}

func sub(a, b uint64) uint64 {
	if b < a {
		return 0 // a counter restarted (a comeback): no difference to speak of
	}
	return b - a
}

// maskLoad: engaged by cause, the datapath sees every CPU but the targets
// as full, so that the policy moves stages only to the targets (and
// moves a steered flow off a CPU that stopped being one). The set's
// average stays the real one.
func maskLoad(perCPU []uint32, targets []int) []uint32 {
	out := slices.Clone(perCPU)
	for i := range out {
		if !slices.Contains(targets, i) {
			out[i] = 100
		}
	}
	return out
}

func (r CauseRecord) String() string {
	v, s := r.Step.Verdict, r.Step
	out := v.Why
	if s.Confirm != nil {
		out += fmt.Sprintf("; confirming: %s (%s)", s.Confirm.Outcome, s.Confirm.Why)
	}
	if s.Action != "" {
		out += "; action " + s.Action
	}
	return out
}
