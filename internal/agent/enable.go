package agent

import "fmt"

// Enabled says what Enable did.
type Enabled struct {
	Already  bool   // an agent with the same settings runs: nothing changed
	Replaced *State // what ran with other settings and was disabled first
	Pid      int    // the background agent (agent modes), or the one already running
	Log      string // its log
	Applied  *State // the values set (static modes)
}

// Enable turns o on in its namespace, o having passed Check: a static
// mode's values are set here and nothing is left running; an agent mode
// starts a background agent with argv (the command that runs 'falcon
// agent'), unless one with the same settings runs already. Whatever ran
// with other settings is disabled first.
func Enable(o Options, argv ...string) (Enabled, error) {
	var e Enabled
	st, err := Running(o)
	if err != nil {
		return e, err
	}
	static := IsStatic(o.Mode)
	if static && o.MetricsAddr != "" {
		return e, fmt.Errorf("--metrics-addr: mode %s only sets values and leaves no process to serve metrics (run 'falcon agent --mode %s --metrics-addr ...' instead)", o.Mode, o.Mode)
	}
	if !static {
		if err := probeMetricsAddr(o, st); err != nil {
			return e, err
		}
	}
	if st != nil {
		if !static && st.Pid > 0 && sameSettings(st.Options, o) {
			e.Already, e.Pid = true, st.Pid
			return e, nil
		}
		if _, err := Disable(o); err != nil {
			return e, fmt.Errorf("stop the running agent: %w", err)
		}
		e.Replaced = st
	}
	if static {
		e.Applied, err = Apply(o)
		return e, err
	}
	e.Pid, e.Log, err = Spawn(o, argv...)
	return e, err
}
