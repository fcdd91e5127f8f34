package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
)

// TestRunPaperAllNothingToRun: a figure that cannot run gets a file with
// the reason and no results, one complete already is not run again, one
// drawn from a bench that did not run says so; nothing runs, and the
// summary names each.
func TestRunPaperAllNothingToRun(t *testing.T) {
	dir := t.TempDir()
	done := filepath.Join(dir, "fig7.json")
	if err := schema.WriteFile(done, &schema.File{Format: schema.Format, Results: []schema.Result{}}); err != nil {
		t.Fatal(err)
	}
	benches := []FigureBench{
		{Preset: "fig7", Paper: "HotCloud", Figure: "Fig. 7", File: done, Done: "complete in " + done},
		{Preset: "fig10", Paper: "FALCON", Figure: "Fig. 10", File: filepath.Join(dir, "fig10.json"), Skip: "no tool"},
		{Preset: "fig8", Paper: "HotCloud", Figure: "Fig. 8", File: filepath.Join(dir, "fig8.json"), From: "fig10"},
	}
	var notes, out bytes.Buffer
	err := RunPaperAll(context.Background(), benches, PaperAllOptions{Version: "test", Command: "go test",
		Note: func(f string, a ...any) { fmt.Fprintf(&notes, f+"\n", a...) }, Stderr: os.Stderr, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	f, err := schema.ReadFile(filepath.Join(dir, "fig10.json"))
	if err != nil || len(f.Results) != 0 || len(f.Notes) != 1 || f.Notes[0] != "not run: no tool" || f.Config.Preset != "fig10" {
		t.Errorf("fig10's file: %+v, %v", f, err)
	}
	for _, want := range []string{"fig7 (HotCloud Fig. 7, 1/3): complete in", "fig10 (FALCON Fig. 10, 2/3): not run: no tool",
		"fig8 (HotCloud Fig. 8): not drawn: the bench of fig10 did not run"} {
		if !strings.Contains(notes.String(), want) {
			t.Errorf("no %q in\n%s", want, notes.String())
		}
	}
	if out.Len() != 0 {
		t.Errorf("tables of figures that did not run:\n%s", out.String())
	}
}
