package top

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/agent"
)

// report is falcon status's test report of an agent with stages and split.
func report(t *testing.T) *agent.Report {
	t.Helper()
	b, err := os.ReadFile("../agent/testdata/reports.json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []*agent.Report
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	return rs[0]
}

// later is r a second on: the VXLAN device's hook ran 2000 more packets on
// CPU 1 and steered them all to CPU 0's containers.
func later(t *testing.T, r *agent.Report) *agent.Report {
	b, _ := json.Marshal(r)
	var n agent.Report
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	for i := range n.Stages {
		if s := &n.Stages[i]; string(s.Role) == "overlay" {
			s.RanOn[1] += 2000
			s.SteeredTo[0] += 2000
		}
	}
	n.Totals.Fallback += 500
	return &n
}

func TestFrame(t *testing.T) {
	r0 := report(t)
	r1 := later(t, r0)
	at := time.Now()
	f := Render(&Sample{r0, at}, &Sample{r1, at.Add(time.Second)}, 100, Style{})
	t.Logf("\n%s", f)
	if strings.ContainsRune(f, 0x1b) {
		t.Error("a plain frame holds escape codes")
	}
	for _, want := range []string{"netns " + r0.Netns, "cpu0", "cpu1", "threshold 85%", "fallback         500/s"} {
		if !strings.Contains(f, want) {
			t.Errorf("frame lacks %q", want)
		}
	}
	var cpu0, cpu1 string
	for _, l := range strings.Split(f, "\n") {
		switch {
		case strings.HasPrefix(l, "cpu0"):
			cpu0 = l
		case strings.HasPrefix(l, "cpu1"):
			cpu1 = l
		}
	}
	if !strings.Contains(cpu1, "2000") || !strings.Contains(cpu0, "containers 2000") {
		t.Errorf("stages per CPU: want the VXLAN stage's 2000/s on cpu1 and the containers' on cpu0:\n%s\n%s", cpu0, cpu1)
	}
	if l := r0.Load.PerCPU[0]; !strings.Contains(cpu0, strings.Repeat("#", int(l)*30/100)+".") {
		t.Errorf("cpu0 at %d%%: bar %q", l, cpu0)
	}
	// Without an earlier sample there are no rates, and nothing breaks.
	if f := Render(nil, &Sample{r0, at}, 60, Style{}); !strings.Contains(f, "cpu0") {
		t.Errorf("first frame:\n%s", f)
	}
}

func TestNothingToWatch(t *testing.T) {
	o := agent.DefaultOptions()
	o.StateRoot = t.TempDir()
	err := Once(new(strings.Builder), Options{Agent: o, Interval: time.Millisecond}, 80)
	if err == nil || !strings.Contains(err.Error(), "falcon is not enabled in network namespace host") {
		t.Errorf("top with no agent: %v", err)
	}
}
