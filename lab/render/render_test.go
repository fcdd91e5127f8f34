package render

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testdata/results.json was recorded with
//
//	falcon-lab bench --layouts host,docker --workloads udp-stress:16,tcp:64K,latency:16 --runs 2 --duration 1s
//
// on the 2-CPU development machine.
const recorded = "testdata/results.json"

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what was rendered (go test -update rewrites it):\n%s", path, got)
	}
}

func TestTableGolden(t *testing.T) {
	f, err := schema.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, f); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 8 || !strings.HasPrefix(lines[0], "| layout | mode | workload |") {
		t.Fatalf("not a table:\n%s", b.String())
	}
	for _, l := range lines[2:8] {
		if strings.Count(l, "|") != strings.Count(lines[0], "|") {
			t.Errorf("row has a different column count than the header: %q", l)
		}
	}
	golden(t, "results.md", b.Bytes())
}

func TestSVGGolden(t *testing.T) {
	f, err := schema.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, f); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML with one bar per normalised result.
	d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	bars := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "title" {
			bars++
		}
	}
	if bars != len(f.Results) {
		t.Errorf("%d bars, want %d", bars, len(f.Results))
	}
	golden(t, "results.svg", b.Bytes())
}
