package agent

import (
	"fmt"
	"io"
)

// WriteExplain says why falcon is where it is (falcon status --explain):
// the latest turn decided by cause, its inputs and verdict, and the
// latest decisions that acted, each with its inputs.
func (r *Report) WriteExplain(w io.Writer) {
	e := r.Engagement
	if e != nil && e.Never != "" {
		fmt.Fprintf(w, "\nexplain: no decisions taken: never on the path (%s)\n", e.Never)
		return
	}
	if e == nil || e.Cause == nil {
		fmt.Fprintln(w, "\nexplain: no decision by cause yet (the paper policy, an agent just started, or one older than the decision by cause)")
		return
	}
	fmt.Fprintln(w, "\nexplain (adaptive policy, decision by cause):")
	e.Cause.Explain(w, "  latest")
	if len(e.Decisions) > 0 {
		fmt.Fprintln(w, "  decisions that acted, oldest first:")
		for _, d := range e.Decisions {
			d.Explain(w, "   ")
		}
	}
}
