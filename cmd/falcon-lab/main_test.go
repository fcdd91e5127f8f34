package main

import (
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
// ones falcon-lab has.
func TestLabCommands(t *testing.T) {
	names := slices.DeleteFunc(app.Names(), func(n string) bool { return n == "version" })
	if !slices.Equal(names, cli.LabCommands) {
		t.Errorf("falcon-lab's commands are %q; cli.LabCommands says %q", names, cli.LabCommands)
	}
}
