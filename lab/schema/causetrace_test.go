package schema

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/falconnet/falcon/internal/cause"
)

// A run's decisions by cause become one replayable trace.
func TestCauseTraces(t *testing.T) {
	w := CauseWindow{Ms: 150, Delivered: 10, CPUs: []CauseCPU{{ID: 1, Busy: 99, Softirq: 60}}}
	act := &FalconActivity{Causes: &CauseActivity{Params: CauseParams{Threshold: 85, Set: []int{0, 1}},
		Trace: []CauseRecord{{Seq: 1, Window: w}, {Seq: 2, Window: w}}}}
	f := &File{Results: []Result{{Layout: "docker", Mode: "falcon:policy=paper", Workload: "udp-stress", Size: 16,
		Runs: []Run{{}, {Falcon: act}}}}}
	got := f.CauseTraces()
	tr, ok := got["docker-falcon_policy_paper-udp-stress-16-run2.json"]
	if len(got) != 1 || !ok || len(tr.Windows) != 2 || tr.Params.Threshold != 85 || len(tr.Params.Set) != 2 ||
		tr.Windows[1].Ms != 150 || tr.Windows[1].Delivered != 10 || tr.Windows[1].CPUs[0] != (cause.CPU{ID: 1, Busy: 99, Softirq: 60}) {
		t.Fatalf("traces: %+v", got)
	}
	if s := tr.Replay(0); len(s) != 2 {
		t.Errorf("replayed %d turns", len(s))
	}
}

// TestCommittedCauses: a committed results file's decisions by cause
// decode into the file's own types with nothing lost: every field the file
// holds comes back, with its value, when the types write it again.
func TestCommittedCauses(t *testing.T) {
	const name = "../../results/fastpath-2cpu-vm/udp-stress-4.json"
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []struct {
			Runs []struct {
				Falcon *struct {
					Causes json.RawMessage `json:"causes"`
				} `json:"falcon"`
			} `json:"runs"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	turns := 0
	for i, r := range doc.Results {
		for j, run := range r.Runs {
			if run.Falcon == nil || run.Falcon.Causes == nil {
				continue
			}
			c := f.Results[i].Runs[j].Falcon.Causes
			turns += len(c.Trace)
			again, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var was, is any
			if err := json.Unmarshal(run.Falcon.Causes, &was); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(again, &is); err != nil {
				t.Fatal(err)
			}
			if path := lost(was, is, "causes"); path != "" {
				t.Fatalf("result %d run %d: %s lost or changed in decoding", i, j, path)
			}
		}
	}
	if turns < 100 || len(f.CauseTraces()) == 0 {
		t.Fatalf("%s: %d turns decoded, %d traces: not the file this test was written for", name, turns, len(f.CauseTraces()))
	}
}

// lost is the path of the first value of was that is missing from is or
// differs there ("" when none: is may hold more, the fields files of its
// time lack).
func lost(was, is any, path string) string {
	switch w := was.(type) {
	case map[string]any:
		m, ok := is.(map[string]any)
		if !ok {
			return path
		}
		for k, v := range w {
			if p := lost(v, m[k], path+"."+k); p != "" {
				return p
			}
		}
		return ""
	case []any:
		l, ok := is.([]any)
		if !ok || len(l) != len(w) {
			return path
		}
		for i := range w {
			if p := lost(w[i], l[i], fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	}
	if was != is {
		return path
	}
	return ""
}
