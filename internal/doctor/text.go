package doctor

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/falconnet/falcon/internal/netns"
)

var sevRank = map[Severity]int{Error: 0, Warn: 1, Info: 2, OK: 3}

// WriteText prints the report for people: the overlay, then the findings
// worst first (ok ones only counted), then what --fix changed.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "falcon doctor: network namespace %s, kernel %s\n\noverlay:\n", netns.Label(r.Netns), r.Kernel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range r.Overlay.Devices {
		extra := ""
		switch {
		case d.VXLAN != nil:
			extra = fmt.Sprintf("vni %d port %d", d.VXLAN.VNI, d.VXLAN.Port)
			if d.VXLAN.Local != "" {
				extra += " local " + d.VXLAN.Local
			}
		case d.Peer != nil:
			extra = "peer " + d.Peer.Name + " in " + netns.Label(d.Peer.Netns)
		}
		if d.Master != "" {
			extra += " master " + d.Master
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\tmtu %d\t%s\t%s\n", d.Role, d.Name, d.Kind, d.MTU, netns.Label(d.Netns), strings.TrimSpace(extra))
	}
	tw.Flush()
	for _, wn := range r.Overlay.Warnings {
		fmt.Fprintf(w, "  note: %s\n", wn)
	}
	fs := append([]Finding(nil), r.Findings...)
	sort.SliceStable(fs, func(i, j int) bool { return sevRank[fs[i].Severity] < sevRank[fs[j].Severity] })
	fmt.Fprintln(w, "\nfindings:")
	ok, fixed := 0, 0
	for _, f := range fs {
		if f.Severity == OK {
			ok++
			continue
		}
		where := ""
		if f.Device != "" {
			where = " " + f.Device
			if f.Netns != r.Netns {
				where += " (" + netns.Label(f.Netns) + ")"
			}
		}
		fmt.Fprintf(w, "  %-5s %s%s: %s\n", strings.ToUpper(string(f.Severity)), f.Check, where, f.Message)
		if f.Fix == "" {
			continue
		}
		switch {
		case f.Fixed:
			fixed++
			fmt.Fprintf(w, "        FIXED: %s\n", f.Fix)
		case f.FixError != "":
			fmt.Fprintf(w, "        fix failed (%s): %s\n", f.FixError, f.Fix)
		case f.Safe && f.Severity.Problem():
			fmt.Fprintf(w, "        fix (safe, --fix applies it): %s\n", f.Fix)
		case f.Severity.Problem():
			fmt.Fprintf(w, "        fix (by hand): %s\n", f.Fix)
		default:
			fmt.Fprintf(w, "        to change it: %s\n", f.Fix)
		}
	}
	fmt.Fprintf(w, "\n%d checks ok, %d problem(s) left", ok, r.Problems())
	if fixed > 0 {
		fmt.Fprintf(w, ", %d fixed", fixed)
	}
	_, err := fmt.Fprintln(w)
	return err
}
