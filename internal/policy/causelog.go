package policy

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/falconnet/falcon/internal/cause"
)

// Record is one turn by cause: what the agent read, and what it decided.
type Record struct {
	Seq    uint64       `json:"seq"`
	At     time.Time    `json:"at"`
	Window cause.Window `json:"window"`
	Step   cause.Step   `json:"step"`
}

// causeKeep: the turns kept for bench and status, about 5 minutes.
const causeKeep = 2000

// Log keeps the latest turns.
type Log struct {
	mu     sync.Mutex
	ring   []Record
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
	Last Record
}

func (l *Log) add(p cause.Params, r Record) Record {
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

// Since returns the turns after seq (those still kept), and the last seq.
func (l *Log) Since(seq uint64) ([]Record, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for _, r := range l.ring {
		if r.Seq > seq {
			out = append(out, r)
		}
	}
	return out, l.seq
}

func (l *Log) Snapshot() CauseCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts
}

func (r Record) String() string {
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

// Explain says the turn, its inputs and verdict (falcon status
// --explain), each line after prefix.
func (r Record) Explain(w io.Writer, prefix string) {
	s, win := r.Step, r.Window
	fmt.Fprintf(w, "%s (%s ago, phase %s", prefix, time.Since(r.At).Round(100*time.Millisecond), s.Phase)
	if s.Action != "" {
		fmt.Fprintf(w, ", action %s", s.Action)
	}
	fmt.Fprintln(w, ")")
	if win.Unreadable != "" {
		fmt.Fprintf(w, "%s   causes unreadable: %s; the A/B engagement test decides\n", prefix, win.Unreadable)
		return
	}
	fmt.Fprintf(w, "%s   inputs over %.0f ms: %s; applications on %v; NIC on %v; delivered %d, socket drops %d\n",
		prefix, win.Ms, cpuCauses(win.CPUs), win.AppCPUs, win.NICCPUs, win.Delivered, win.SockDrops)
	fmt.Fprintf(w, "%s   verdict: %s\n", prefix, s.Verdict.Why)
	if c := s.Confirm; c != nil {
		fmt.Fprintf(w, "%s   confirmation: %s: %s\n", prefix, c.Outcome, c.Why)
	}
}

// cpuCauses: "cpu0 99% (soft 80%, drops 3)" for each CPU.
func cpuCauses(cpus []cause.CPU) string {
	var parts []string
	for _, c := range cpus {
		p := fmt.Sprintf("cpu%d %.0f%% (soft %.0f%%", c.ID, c.Busy, c.Softirq)
		if c.Dropped+c.Squeezed > 0 {
			p += fmt.Sprintf(", dropped %d, squeezed %d", c.Dropped, c.Squeezed)
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}
