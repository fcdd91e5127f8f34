package schema

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/falconnet/falcon/internal/agent"
)

// Vanilla is the kernel as it comes, the lab's baseline: a mode bench
// runs and sim models, which the product has no name for (there is nothing
// to enable).
const Vanilla = "vanilla"

// Mode is a mode as bench --modes, falcon-lab sim and a results file name it:
// vanilla, or a spec of the agent's catalogue (agent.ParseMode), either
// optionally ending in "@LABEL" (vanilla@aa, falcon:threshold=90@b): the
// same mode once more under another name, so that one bench runs it twice
// (vanilla against vanilla@aa is an A/A comparison, the spread a
// difference between modes must exceed on this machine).
type Mode struct {
	Spec    string // as given, label included
	Label   string // after '@'; "" without one
	Vanilla bool
	// Opts are the agent's options for the mode; for vanilla, the
	// defaults with no implementation (Opts.Mode "").
	Opts agent.Options
}

// ParseMode reads a mode spec; errors of the catalogue's are
// *agent.SettingError.
func ParseMode(spec string) (Mode, error) {
	spec = strings.TrimSpace(spec)
	base, label, labelled := strings.Cut(spec, "@")
	if labelled && !validLabel(label) {
		return Mode{}, fmt.Errorf("mode %q: a label after @ is 1..16 of a-z and 0-9", spec)
	}
	m := Mode{Spec: spec, Label: label, Opts: agent.DefaultOptions()}
	if base == Vanilla {
		m.Vanilla, m.Opts.Mode = true, ""
		return m, nil
	}
	if err := agent.ParseMode(base, &m.Opts); err != nil {
		return Mode{}, err
	}
	return m, nil
}

func validLabel(l string) bool {
	if len(l) < 1 || len(l) > 16 {
		return false
	}
	for _, c := range l {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ModeNames lists vanilla and the catalogue's modes, sorted.
func ModeNames() []string {
	n := append(agent.ModeNames(), Vanilla)
	sort.Strings(n)
	return n
}

// SplitModes splits a comma-separated list of mode specs, where a spec's
// settings may hold commas too ("falcon:cpus=0-1,4,rfs"): a part without
// ':' that names no mode continues the settings before it.
func SplitModes(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		name, _, _ := strings.Cut(p, ":")
		name, _, _ = strings.Cut(name, "@")
		switch {
		case p == "":
		case len(out) > 0 && strings.Contains(out[len(out)-1], ":") && !strings.Contains(p, ":") && !slices.Contains(ModeNames(), name):
			out[len(out)-1] += "," + p
		default:
			out = append(out, p)
		}
	}
	return out
}
