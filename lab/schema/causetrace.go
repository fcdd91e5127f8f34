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
			t := cause.Trace{About: about, Params: c.Params}
			for _, rec := range c.Trace {
				t.Windows = append(t.Windows, rec.Window)
			}
			name := strings.NewReplacer("/", "_", ":", "_", "=", "_", "+", "_", " ", "_").
				Replace(fmt.Sprintf("%s-%s-%s-%d-run%d.json", r.Layout, r.Mode, r.Workload, r.Size, i+1))
			out[name] = t
		}
	}
	return out
}
