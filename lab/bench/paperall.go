package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"reflect"
	"time"

	"github.com/falconnet/falcon/lab/benchprobe"
	"github.com/falconnet/falcon/lab/schema"
)

// PaperAll reports whether the flags ask for every figure (--preset
// paper-all): ResolvePaperAll, not Resolve.
func (f *Flags) PaperAll() bool { return f.preset == PaperAll }

// FigureBench is one figure's bench within paper-all.
type FigureBench struct {
	Preset        string        // fig10, …
	Paper, Figure string        // "FALCON", "Fig. 10"
	File          string        // its results file, DIR/PRESET.json
	Config        schema.Config // resolved (Config.JSON is File); zero when Skip
	Skip          string        // why it does not run here
	// From is a figure whose bench runs every case of this one with the
	// same settings (HotCloud's Fig. 7 and 8 plot two metrics of the same
	// runs; FALCON's Fig. 17 is MFLOW's Fig. 11 without mflow): this
	// figure's file is that bench's results of its own cases, not a bench
	// of its own (FromFile).
	From string
	// Done says where this figure's bench already ran to its end
	// (--resume): its file stands, and it is not run again.
	Done string
}

// ResolvePaperAll resolves every figure's preset, in the papers' order,
// under the flags given (but --preset and --json), each into its file in
// the directory --json names. A figure whose preset refuses, or does not
// resolve on this machine, is returned with Skip saying why; flags that
// are wrong for every figure are an error.
func (f *Flags) ResolvePaperAll(online []int) ([]FigureBench, error) {
	if f.json == "" {
		return nil, configErrorf("--preset %s writes one results file per figure: --json DIR names the directory", PaperAll)
	}
	if f.calibrate {
		return nil, configErrorf("--calibrate runs the calibrate preset, not --preset %s", PaperAll)
	}
	var given [][2]string
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name != "preset" && fl.Name != "json" && fl.Name != "resume" {
			given = append(given, [2]string{fl.Name, fl.Value.String()})
		}
	})
	with := func(preset string) (schema.Config, error) {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		nf := RegisterFlags(fs)
		for _, kv := range given {
			if err := fs.Set(kv[0], kv[1]); err != nil {
				return schema.Config{}, configErrorf("--%s %s: %v", kv[0], kv[1], err)
			}
		}
		if preset != "" {
			if err := fs.Set("preset", preset); err != nil {
				return schema.Config{}, err
			}
		}
		return nf.Resolve(online)
	}
	// The flags alone, over the defaults: a mistake there is every
	// figure's.
	if _, err := with(""); err != nil {
		return nil, err
	}
	var out []FigureBench
	for i := range figureTable {
		r := &figureTable[i]
		fb := FigureBench{Preset: r.name, Paper: r.paper, Figure: r.figure, File: filepath.Join(f.json, r.name+".json")}
		if why := r.refusal(); why != "" {
			fb.Skip = why
		} else if c, err := with(r.name); err != nil {
			fb.Skip = fmt.Sprintf("%s cannot run on this machine: %v", r.title(), err)
		} else {
			c.JSON = fb.File
			fb.Config = c
			if f.resume {
				fb.Done = completed(fb.File, c)
			}
		}
		out = append(out, fb)
	}
	drawFrom(out)
	return out, nil
}

// drawFrom sets From of every figure whose cases another figure's bench
// runs with the same settings: the one of most cases, the earlier of two
// of the same cases. Its choice runs a bench of its own (no chains):
// within the same settings a bench holding every case of a bench that
// holds this one's holds this one's too, and has more.
func drawFrom(benches []FigureBench) {
	cases := make([]map[caseKey]int, len(benches))
	for i, fb := range benches {
		if fb.Skip == "" {
			cases[i] = caseCounts(fb.Config)
		}
	}
	for i := range benches {
		best := -1
		for j := range benches {
			if j == i || cases[i] == nil || cases[j] == nil || !sameSettings(benches[i].Config, benches[j].Config) || !within(cases[i], cases[j]) {
				continue
			}
			if best < 0 || len(cases[j]) > len(cases[best]) {
				best = j
			}
		}
		if best >= 0 && (len(cases[best]) > len(cases[i]) || best < i) {
			benches[i].From = benches[best].Preset
		}
	}
}

// caseKey is a case as its result names it (a rates workload's rates
// count as the same case: within the same settings they are the same
// rates).
type caseKey struct {
	layout, mode, workload string
	size, flows            int
}

func resultKey(r schema.Result) caseKey {
	return caseKey{r.Layout, r.Mode, r.Workload, r.Size, r.Flows}
}

// caseCounts counts the cases c plans, by key; nil where c does not plan.
func caseCounts(c schema.Config) map[caseKey]int {
	plan, _, err := Plan(c)
	if err != nil {
		return nil
	}
	m := map[caseKey]int{}
	for _, tp := range plan {
		for _, cs := range tp.Cases {
			m[caseKey{cs.Layout, cs.Mode, cs.Workload, cs.Size, cs.Flows}]++
		}
	}
	return m
}

// within reports whether every case of a is in b.
func within(a, b map[caseKey]int) bool {
	for k, n := range a {
		if b[k] < n {
			return false
		}
	}
	return true
}

// completed says where the results file at path holds the bench c to its
// end, with no failure: not a checkpoint, not interrupted, every case this
// falcon plans for c there ("" where not: a newer falcon may run more
// cases of the same flags, as falcon+split on the host layout, Host+).
// The configurations are compared as the file records them, in JSON.
func completed(path string, c schema.Config) string {
	f, err := schema.ReadFile(path)
	if err != nil || f.Partial || f.Interrupted || f.Finished.IsZero() {
		return ""
	}
	have := map[caseKey]int{}
	for _, r := range f.Results {
		if len(r.Errors) > 0 {
			return ""
		}
		have[resultKey(r)]++
	}
	want := caseCounts(c)
	if want == nil || !within(want, have) {
		return ""
	}
	a, b := f.Config, c
	a.Preset, a.JSON, b.Preset, b.JSON = "", "", "", ""
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil || !bytes.Equal(ja, jb) {
		return ""
	}
	return fmt.Sprintf("complete in %s (falcon %s, finished %s)", path, f.FalconVersion, f.Finished.UTC().Format("2006-01-02 15:04 UTC"))
}

// sameSettings reports whether two configurations differ only in what
// cases they run (layouts, modes, workloads, sizes, flows), the preset
// and the results file.
func sameSettings(a, b schema.Config) bool {
	for _, c := range []*schema.Config{&a, &b} {
		c.Preset, c.JSON, c.Layouts, c.Modes, c.Workloads, c.Sizes, c.Flows = "", "", nil, nil, nil, nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// FromFile is the results file of a figure drawn from another's bench
// (FigureBench.From): that bench's results of this figure's cases, under
// this figure's configuration, divided by this figure's baseline.
func FromFile(fb FigureBench, of *schema.File) *schema.File {
	f := *of
	f.Config = fb.Config
	want := caseCounts(fb.Config)
	f.Results = nil
	for _, r := range of.Results {
		if k := resultKey(r); want[k] > 0 {
			want[k]--
			r.Summary, r.Normalized = maps.Clone(r.Summary), nil
			f.Results = append(f.Results, r)
		}
	}
	schema.Normalize(f.Results, f.Config.Baseline)
	what := "its results of this figure's cases"
	if len(f.Results) == len(of.Results) {
		what = "its results"
	}
	f.Notes = append([]string{fmt.Sprintf("drawn from the bench of %s (%s), run once for both: %s", fb.From, of.Config.JSON, what)}, of.Notes...)
	return &f
}

// NotRunFile is the results file of a figure that did not run: no
// results, and why in its notes, so the report shows it.
func NotRunFile(fb FigureBench, version, command string) *schema.File {
	now := time.Now().UTC().Truncate(time.Second)
	c := fb.Config
	c.Preset = fb.Preset
	return &schema.File{Format: schema.Format, FalconVersion: version, Started: now, Finished: now, Command: command,
		Machine: benchprobe.DescribeMachine(nil), Config: c, Notes: []string{"not run: " + fb.Skip}, Results: []schema.Result{}}
}
