package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/sim"
)

// recordedCalibration is the calibration the README quotes (2 vCPUs).
const recordedCalibration = "../../results/sim-2cpu-vm/calibration-2cpu-vm.json"

// TestSimBadInput: every mistake is reported before anything is simulated
// or written.
func TestSimBadInput(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other-version.json")
	b, err := os.ReadFile(recordedCalibration)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["config"].(map[string]any)["calibrate"] = 99
	b, _ = json.Marshal(m)
	if err := os.WriteFile(other, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "never.json")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{}, 2, "want one of --validate FILE and --calibration FILE"},
		{[]string{"--validate", "a", "--calibration", "b"}, 2, "want one of"},
		{[]string{"--calibration", recordedCalibration, "--cores", "0", "--json", out}, 2, "cores 0: want 1..1024"},
		{[]string{"--calibration", recordedCalibration, "--cores", "two"}, 2, "want whole numbers"},
		{[]string{"--calibration", recordedCalibration, "--modes", "vanilla,mflow", "--json", out}, 2, "the model has no micro-flows"},
		{[]string{"--calibration", recordedCalibration, "--modes", "vanilla,falcon9", "--json", out}, 2, `unknown mode "falcon9"`},
		{[]string{"--calibration", recordedCalibration, "--loads", "-1"}, 2, "load -1"},
		{[]string{"--calibration", recordedCalibration, "--size", "0"}, 2, "size 0"},
		{[]string{"--calibration", recordedCalibration, "--strict"}, 2, "--strict belongs to --validate"},
		{[]string{"--calibration", other, "--json", out}, 1, "made by another version of falcon"},
		{[]string{"--validate", "../../lab/render/testdata/results.json"}, 1, "not a calibration file"},
		{[]string{"--calibration", "/nonexistent.json"}, 1, "no such file"},
	} {
		err := runSim(c.args)
		if code := cli.ExitCode(err); code != c.code || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("sim %v: exit %d, %v; want exit %d with %q", c.args, code, err, c.code, c.msg)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused prediction wrote %s", out)
	}
}

func TestSimPredictWritesLabelledFiles(t *testing.T) {
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "p.json"), filepath.Join(dir, "p.svg")
	var buf bytes.Buffer
	simOut = &buf
	defer func() { simOut = os.Stdout }()
	if err := runSim([]string{"--calibration", recordedCalibration, "--cores", "2,8", "--modes", "vanilla,falcon+split",
		"--flows", "1", "--loads", "2", "--json", js, "--svg", svg}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "SIMULATED") {
		t.Errorf("the table does not start with the label:\n%s", buf.String())
	}
	var p sim.Prediction
	b, err := os.ReadFile(js)
	if err != nil || json.Unmarshal(b, &p) != nil || !p.Simulated || len(p.Points) != 4 {
		t.Fatalf("%s: %v %+v", js, err, p)
	}
	if s, err := os.ReadFile(svg); err != nil || !strings.Contains(string(s), "SIMULATED") {
		t.Errorf("%s: %v, or no label", svg, err)
	}
}
