package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/datapath"
)

// The text of falcon status and of a static mode's summary, for reports of
// every kind (an agent with stages, split and values; a static mode; none),
// stays as it was written in cmd/falcon: testdata/reports.txt is that
// code's output.
func TestReportText(t *testing.T) {
	b, err := os.ReadFile("testdata/reports.json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []*Report
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, r := range rs {
		r.WriteText(&out)
		out.WriteString("=====\n")
		out.WriteString(SummarizeValues(r.Values) + "\n=====\n")
	}
	want, err := os.ReadFile("testdata/reports.txt")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestEngagementLine(t *testing.T) {
	r := &Report{Netns: "h2", Enabled: true, Running: true, Ready: true, Pid: 1, Engagement: &Engagement{Tests: 3, ForSteering: 1, Last: time.Now(), Steering: 1030, Off: 1000, Steer: true}}
	var out bytes.Buffer
	r.WriteText(&out)
	if !bytes.Contains(out.Bytes(), []byte("verdicts 3, for steering 1; the last (0s ago): steering, delivered 1030 steering against 1000 off the path (+3.0 %)")) {
		t.Errorf("status text:\n%s", out.String())
	}
	r.Engagement = &Engagement{Tests: 2, Last: time.Now(), Steering: 990, Off: 1000, Again: time.Now().Add(20*time.Second + 300*time.Millisecond)}
	out.Reset()
	r.WriteText(&out)
	if !bytes.Contains(out.Bytes(), []byte("off the path, delivered 990 steering against 1000 off the path (-1.0 %); tests the busy spell again in 20s")) {
		t.Errorf("status text after a verdict against:\n%s", out.String())
	}
	if got := relative(5, 0); got != "no traffic off the path" {
		t.Errorf("relative(5, 0) = %q", got)
	}
}

// Liveness is looser than readiness: only a gone process or a stopped
// load sampler is worth a restart, which restores and reapplies
// everything.
func TestWhyNotAlive(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     Report
		alive bool
	}{
		{"not enabled", Report{}, false},
		{"starting", Report{Enabled: true, Running: true, Problem: "an agent is starting"}, true},
		{"no hooks yet", Report{Enabled: true, Running: true, Load: &LoadReport{}}, true},
		{"stood down", Report{Enabled: true, Running: true, StoodDown: true, Load: &LoadReport{}}, true},
		{"static", Report{Enabled: true, Static: true}, true},
		{"gone", Report{Enabled: true, Problem: "agent pid 7 is gone"}, false},
		{"sampler stopped", Report{Enabled: true, Running: true, Load: &LoadReport{Stale: true}}, false},
	} {
		why := c.r.WhyNotAlive()
		if (why == "") != c.alive {
			t.Errorf("%s: WhyNotAlive %q, want alive %v", c.name, why, c.alive)
		}
	}
}

// TestConntrackText: status says when the keeper lets flows on only once
// established (the ruleset queues new packets to user space).
func TestConntrackText(t *testing.T) {
	var out bytes.Buffer
	writeConntrack(&out, &datapath.CtReport{Tracked: true, Period: "5s", Kept: 2, Established: true})
	if want := "established only (the rules queue new packets to user space): 2 flows let on once established"; !bytes.Contains(out.Bytes(), []byte(want)) {
		t.Errorf("got %q, want it to hold %q", out.String(), want)
	}
}
