package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
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

// TestNodeCommands: the commands falcon-lab points to falcon for are the
// ones falcon has.
func TestNodeCommands(t *testing.T) {
	names := slices.DeleteFunc(app.Names(), func(n string) bool { return n == "version" })
	if !slices.Equal(names, cli.NodeCommands) {
		t.Errorf("falcon's commands are %q; cli.NodeCommands says %q", names, cli.NodeCommands)
	}
}
