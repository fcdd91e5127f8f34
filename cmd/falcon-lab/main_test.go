package main

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/labtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	labtest.RemoveBuilds()
	os.Exit(code)
}

// TestLabCommands: the commands falcon points to falcon-lab for are the
// ones falcon-lab has; falcon-lab points to falcon for the node's.
func TestLabCommands(t *testing.T) {
	names := slices.DeleteFunc(app.Names(), func(n string) bool { return n == "version" })
	if !slices.Equal(names, cli.LabCommands) {
		t.Errorf("falcon-lab's commands are %q; cli.LabCommands says %q", names, cli.LabCommands)
	}
	var out bytes.Buffer
	want := "falcon-lab: enable is a command of falcon: run 'falcon enable --netns h2'\n"
	if code := app.Main([]string{"enable", "--netns", "h2"}, &out); code != 2 || out.String() != want {
		t.Errorf("falcon-lab enable: exit %d, %q; want exit 2, %q", code, out.String(), want)
	}
}
