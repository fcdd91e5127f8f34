package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
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
