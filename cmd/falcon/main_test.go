package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLabCommandPointsThere: falcon asked for one of the lab's commands
// says where it is, in one line, with the status of a bad command line.
func TestLabCommandPointsThere(t *testing.T) {
	var out bytes.Buffer
	code := app.Main([]string{"bench", "--preset", "demo"}, &out)
	want := "falcon: bench is a command of falcon-lab: run 'falcon-lab bench --preset demo'\n"
	if code != 2 || out.String() != want {
		t.Errorf("falcon bench: exit %d, %q; want exit 2, %q", code, out.String(), want)
	}
	out.Reset()
	if code := app.Main([]string{"benchh"}, &out); code != 2 || !strings.Contains(out.String(), `unknown command "benchh"`) {
		t.Errorf("falcon benchh: exit %d, %q", code, out.String())
	}
}
