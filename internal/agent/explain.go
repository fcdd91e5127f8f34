package agent

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/cause"
)

// WriteExplain says why falcon is where it is (falcon status --explain):
// the latest turn decided by cause, its inputs and verdict, and the
// latest decisions that acted, each with its inputs.
func (r *Report) WriteExplain(w io.Writer) {
	e := r.Engagement
	if e == nil || e.Cause == nil {
		fmt.Fprintln(w, "\nexplain: no decision by cause yet (the paper policy, an agent just started, or one older than the decision by cause)")
		return
	}
	fmt.Fprintln(w, "\nexplain (adaptive policy, decision by cause):")
	writeTurn(w, "  latest", *e.Cause)
	if len(e.Decisions) > 0 {
		fmt.Fprintln(w, "  decisions that acted, oldest first:")
		for _, d := range e.Decisions {
			writeTurn(w, "   ", d)
		}
	}
}

func writeTurn(w io.Writer, prefix string, rec CauseRecord) {
	s, win := rec.Step, rec.Window
	fmt.Fprintf(w, "%s (%s ago, phase %s", prefix, time.Since(rec.At).Round(100*time.Millisecond), s.Phase)
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
