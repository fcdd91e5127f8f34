package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

// TestSynopsisNamesEverySetting: the usage line of enable and agent names
// every flag enable takes, so a setting added to the table shows in -h.
func TestSynopsisNamesEverySetting(t *testing.T) {
	fs := app.FlagSet("enable", agentSynopsis)
	agent.AddFlags(fs)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage()
	line, _, _ := strings.Cut(out.String(), "\n")
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(line, "[--"+f.Name+" ") && !strings.Contains(line, "[--"+f.Name+"]") {
			t.Errorf("--%s is missing from the usage line %q", f.Name, line)
		}
	})
}
