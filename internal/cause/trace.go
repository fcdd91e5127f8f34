package cause

import (
	"encoding/json"
	"os"
	"time"
)

// Trace is a run's windows as the agent read them, to replay offline:
// feeding Windows to a Machine with Params gives the run's decisions.
type Trace struct {
	About   string   `json:"about"`
	Params  Params   `json:"params"`
	Windows []Window `json:"windows"`
}

// ReadTrace reads a trace file.
func ReadTrace(path string) (*Trace, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Trace
	return &t, json.Unmarshal(b, &t)
}

// Replay feeds a trace to a fresh Machine and returns every step. After
// an engagement that ends, the next may begin only backoff later, then
// twice as long each time: the agent's back-off (retest), in window time.
func (t *Trace) Replay(backoff time.Duration) []Step {
	m := Machine{P: t.Params}
	var out []Step
	var now, next float64
	wait := float64(backoff.Milliseconds())
	for _, w := range t.Windows {
		now += w.Ms
		s := m.Feed(w, now >= next)
		if s.Action == ActStandDown {
			next, wait = now+wait, 2*wait
		}
		out = append(out, s)
	}
	return out
}
