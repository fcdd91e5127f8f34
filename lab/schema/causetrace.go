package schema

import (
	"fmt"
	"strings"

	"github.com/falconnet/falcon/internal/cause"
)

// CauseTraces are the decisions by cause a results file recorded, one
// replayable trace per run that has them, by a file name that says the
// run (falcon-lab report --traces): a run on a machine we do not have can be
// replayed offline (cause.Trace.Replay).
func (f *File) CauseTraces() map[string]cause.Trace {
	out := map[string]cause.Trace{}
	for _, r := range f.Results {
		for i, run := range r.Runs {
			if run.Falcon == nil || run.Falcon.Causes == nil || len(run.Falcon.Causes.Trace) == 0 {
				continue
			}
			c := run.Falcon.Causes
			about := fmt.Sprintf("%s %s %s %d B, run %d (%s)", r.Layout, r.Mode, r.Workload, r.Size, i+1, run.Started.UTC().Format("2006-01-02T15:04:05Z"))
			t := cause.Trace{About: about, Params: cause.Params{Threshold: c.Params.Threshold, Set: c.Params.Set}}
			for _, rec := range c.Trace {
				t.Windows = append(t.Windows, rec.Window.toCause())
			}
			name := strings.NewReplacer("/", "_", ":", "_", "=", "_", "+", "_", " ", "_").
				Replace(fmt.Sprintf("%s-%s-%s-%d-run%d.json", r.Layout, r.Mode, r.Workload, r.Size, i+1))
			out[name] = t
		}
	}
	return out
}

// toCause is the window as the policy reads it, to replay.
func (w CauseWindow) toCause() cause.Window {
	cw := cause.Window{Ms: w.Ms, AppCPUs: w.AppCPUs, NICCPUs: w.NICCPUs, Listed: w.Listed, NewSockets: w.NewSockets,
		Delivered: w.Delivered, SockDrops: w.SockDrops, Engaged: w.Engaged, Unreadable: w.Unreadable}
	for _, c := range w.CPUs {
		cw.CPUs = append(cw.CPUs, cause.CPU{ID: c.ID, Busy: c.Busy, Softirq: c.Softirq, BusyTicks: c.BusyTicks,
			NetRx: c.NetRx, Dropped: c.Dropped, Squeezed: c.Squeezed})
	}
	return cw
}
