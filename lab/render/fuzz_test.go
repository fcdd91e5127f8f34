package render

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
)

// FuzzDecode: any bytes are a results file or an error, never a panic, and
// a file is something report can print and draw (normalised again, as
// --baseline does); written back as WriteFile writes it, it reads back to
// the same bytes.
func FuzzDecode(f *testing.F) {
	b, err := os.ReadFile(recorded)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// A small file of the same shape, so that mutations reach every field
	// of a result quickly.
	rf, err := schema.Decode(b)
	if err != nil {
		f.Fatal(err)
	}
	rf.Results = rf.Results[:2]
	for i := range rf.Results {
		rf.Results[i].Runs = rf.Results[i].Runs[:1]
	}
	small, err := json.Marshal(rf)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add([]byte(`{"format":1,"results":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rf, err := schema.Decode(b)
		if err != nil {
			return
		}
		if err := WriteTable(io.Discard, rf); err != nil {
			t.Fatalf("table: %v", err)
		}
		if err := WriteSVG(io.Discard, rf); err != nil {
			t.Fatalf("svg: %v", err)
		}
		out, err := json.MarshalIndent(rf, "", "  ")
		if err != nil {
			t.Fatalf("a file read cannot be written: %v", err)
		}
		again, err := schema.Decode(out)
		if err != nil {
			t.Fatalf("a file written cannot be read: %v\n%s", err, out)
		}
		out2, err := json.MarshalIndent(again, "", "  ")
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("written, read and written again it differs (%v):\n%s\nvs\n%s", err, out, out2)
		}
		schema.Normalize(rf.Results, "auto")
		WriteTable(io.Discard, rf)
		schema.Normalize(rf.Results, "docker/falcon")
		WriteSVG(io.Discard, rf)
	})
}
