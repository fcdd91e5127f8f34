package papers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// texts are the papers' text files (shared/papers/README.md says which is which).
var texts = map[string]string{
	"FALCON":      "000_a9b586b719199666.txt",
	"K8s RPS/RFS": "001_bede3b9c7b19fd53.txt",
	"MFLOW":       "002_aab4bd788c21cb7a.txt",
	"HotCloud'19": "003_e9f1ec70a2143bec.txt",
}

func TestParse(t *testing.T) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields() // a misspelt key would vanish silently
	var fs []Figure
	if err := d.Decode(&fs); err != nil {
		t.Fatal(err)
	}
	if len(fs) == 0 {
		t.Fatal("no entries")
	}
	seen := map[string]bool{}
	for i, f := range fs {
		what := f.Paper + " " + f.Figure + " " + f.Panels
		if _, ok := texts[f.Paper]; !ok || f.Figure == "" || f.Section == "" || f.Plotted == "" || f.Quote == "" {
			t.Errorf("entry %d (%s): paper, figure, section, plotted and quote are required", i, what)
		}
		if len(f.Values) == 0 && f.Note == "" {
			t.Errorf("%s: no value and no note saying why", what)
		}
		for _, v := range f.Values {
			if v.System == "" || v.Metric == "" || v.Said == "" || (v.Unit == "×") != (v.RelativeTo != "") || (v.Max != 0 && v.Max <= v.Value) {
				t.Errorf("%s: value %+v: a system, metric and words are required, a ratio (×) needs what it is relative to, a range must rise", what, v)
			}
		}
		// The configuration includes what is plotted: one setup can
		// give a figure's CPU use and its spread.
		cfg, _ := json.Marshal(f.Config)
		key := strings.Join([]string{f.Paper, f.Figure, f.Panels, f.Plotted, string(cfg)}, "|")
		if seen[key] {
			t.Errorf("%s: two entries of one configuration %s", what, cfg)
		}
		seen[key] = true
	}
}

func TestQuotesAreInThePapers(t *testing.T) {
	dir := ""
	for _, d := range []string{"../../../shared/papers", "/work/shared/papers"} {
		if _, err := os.Stat(filepath.Join(d, texts["FALCON"])); err == nil {
			dir = d
			break
		}
	}
	if dir == "" {
		t.Skip("the papers' texts are not here")
	}
	paper := map[string][]rune{}
	for name, file := range texts {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		paper[name] = []rune(normalize(string(b)))
	}
	for _, f := range All() {
		if !contains(paper[f.Paper], []rune(normalize(f.Quote))) {
			t.Errorf("%s %s: quote not in the text: %q", f.Paper, f.Figure, f.Quote)
		}
	}
	if contains(paper["FALCON"], []rune("by as much as 64%")) {
		t.Error("the matcher takes a wrong number")
	}
}

var space = regexp.MustCompile(`\s+`)

// normalize joins lines and closes the gap a line break leaves inside a
// broken word ("F���\n���").
func normalize(s string) string {
	return strings.ReplaceAll(space.ReplaceAllString(s, " "), "\ufffd \ufffd", "\ufffd\ufffd")
}

// contains reports whether q occurs in p where each run of replacement
// characters in p stands for the letters the extraction lost: up to
// three a character (a ligature "ffi", a small-caps "ALCON").
func contains(p, q []rune) bool {
	for i := range p {
		if (p[i] == q[0] || p[i] == '\ufffd') && matchAt(p[i:], q) {
			return true
		}
	}
	return false
}

func matchAt(p, q []rune) bool {
	for len(q) > 0 {
		if len(p) == 0 {
			return false
		}
		if p[0] == '\ufffd' {
			n := 0
			for n < len(p) && p[n] == '\ufffd' {
				n++
			}
			for k := 1; k <= min(3*n, len(q)) && unicode.IsLetter(q[k-1]); k++ {
				if matchAt(p[n:], q[k:]) {
					return true
				}
			}
			return false
		}
		if p[0] != q[0] {
			return false
		}
		p, q = p[1:], q[1:]
	}
	return true
}

func TestLookup(t *testing.T) {
	fs := Lookup("FALCON", "Fig. 13")
	if len(fs) != 4 {
		t.Fatalf("FALCON Fig. 13: %d entries, want 4", len(fs))
	}
	if len(Lookup("FALCON", "Fig. 99")) != 0 {
		t.Error("a figure that is not there was found")
	}
}

func TestComparable(t *testing.T) {
	ratios := func(c Case) []float64 {
		var out []float64
		for _, cl := range Comparable(c) {
			out = append(out, cl.Value.Value)
		}
		return out
	}
	multi := Case{Layout: "docker", Mode: "falcon", Workload: "multi-flow", Size: 16, Flows: 4, Baseline: "docker/vanilla", Metric: "pps"}
	for _, tc := range []struct {
		name string
		edit func(*Case)
		want []float64
	}{
		{"FALCON Fig. 13, multi-flow", func(*Case) {}, []float64{1.63}},
		{"Fig. 13 and Fig. 14", func(c *Case) { c.Flows = 8 }, []float64{1.63, 1.27}},
		{"one flow", func(c *Case) { c.Flows = 1 }, []float64{1}},
		{"to the host", func(c *Case) { c.Baseline = "host/vanilla" }, []float64{0.58}},
		{"Gbit/s of UDP", func(c *Case) { c.Metric = "gbps" }, []float64{1.63}},
		{"a spec with settings", func(c *Case) { c.Mode = "falcon:threshold=90" }, []float64{1.63}},
		{"another size", func(c *Case) { c.Size = 1400 }, nil},
		{"another metric", func(c *Case) { c.Metric = "lat_p99_us" }, nil},
		{"another layout", func(c *Case) { c.Layout, c.Baseline = "vxlan", "vxlan/vanilla" }, nil},
		{"another layout's baseline", func(c *Case) { c.Baseline = "calico/vanilla" }, nil},
		{"a mode no paper has", func(c *Case) { c.Mode = "nope" }, nil},
		{"TCP in packets/s", func(c *Case) {
			c.Workload, c.Size, c.Baseline, c.Metric = "multi-flow-tcp", 4096, "host/vanilla", "pps"
		}, nil},
		{"TCP in Gbit/s", func(c *Case) {
			c.Workload, c.Size, c.Baseline, c.Metric = "multi-flow-tcp", 4096, "host/vanilla", "gbps"
		}, []float64{1.37}},
		{"vanilla overlay to the host, 64 KB TCP", func(c *Case) {
			c.Mode, c.Workload, c.Size, c.Flows, c.Baseline, c.Metric = "vanilla", "tcp", 65536, 1, "host/vanilla", "gbps"
		}, []float64{0.53, 0.6}},
		{"Host+: falcon+split on the host", func(c *Case) {
			c.Layout, c.Mode, c.Workload, c.Size, c.Baseline, c.Metric = "host", "falcon+split", "multi-flow-tcp", 4096, "host/vanilla", "gbps"
		}, []float64{1.56}},
		{"Fig. 16: two choices against the first only", func(c *Case) {
			c.Mode, c.Workload, c.Size, c.Baseline, c.Metric = "falcon:policy=paper", "hotspot", 1400, "docker/falcon:policy=static", "pps"
		}, []float64{1.18}},
		{"Fig. 16, TCP", func(c *Case) {
			c.Mode, c.Workload, c.Size, c.Baseline, c.Metric = "falcon:policy=paper", "hotspot-tcp", 131072, "docker/falcon:policy=static", "gbps"
		}, []float64{1.15}},
		{"RFS+ on Calico", func(c *Case) {
			c.Layout, c.Mode, c.Workload, c.Size, c.Baseline, c.Metric = "calico", "rfs+", "multi-flow-tcp", 131072, "calico/vanilla", "gbps"
		}, []float64{1, 1.24}},
	} {
		c := multi
		tc.edit(&c)
		if got := ratios(c); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %+v: got %v, want %v", tc.name, c, got, tc.want)
		}
	}
}
