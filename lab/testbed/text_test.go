package testbed

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// What falcon-lab testbed up and list print stays as cmd/falcon-lab wrote it:
// testdata/testbeds.txt is that code's output for testdata/testbeds.json
// (planned testbeds of four layouts, one broken, one of unknown layout).
func TestText(t *testing.T) {
	b, err := os.ReadFile("testdata/testbeds.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []Testbed
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for i := range list {
		list[i].WriteText(&out)
	}
	WriteList(&out, list)
	WriteList(&out, nil)
	want, err := os.ReadFile("testdata/testbeds.txt")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
