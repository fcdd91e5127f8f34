package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/sim"
)

// simOut is where sim writes its tables (tests swap it).
var simOut io.Writer = os.Stdout

func init() {
	app.Register(cli.Command{Name: "sim", Summary: "predict falcon on machines we do not have, from a calibration (simulated, labelled so)", Run: runSim})
}

func runSim(args []string) error {
	fs := app.FlagSet("sim", "--validate FILE [--strict] | --calibration FILE [--cores LIST] [--modes LIST] [--flows LIST] [--size B] [--loads LIST] [--json OUT] [--svg OUT.svg]")
	validate := fs.String("validate", "", "predict the measured ratios of the calibration `FILE`'s held-out rounds; exit non-zero when a "+
		"prediction is more than 15 % off and outside the held-out runs' 95 % interval, or most checks are unresolved")
	strict := fs.Bool("strict", false, "--validate: fail any prediction more than 15 % off, however wide the held-out runs spread")
	calFile := fs.String("calibration", "", "the calibration `FILE` (falcon-lab bench --calibrate --json FILE) to predict from")
	cores := fs.String("cores", "2,4,8,16,32,64", "core counts of the machines to predict")
	modes := fs.String("modes", "vanilla,rps,rfs,falcon,falcon:policy=paper,falcon+split", "modes, as bench --modes")
	flows := fs.String("flows", "1,16", "flow counts (UDP, one receiving application each)")
	size := fs.Int("size", 1400, "UDP payload `bytes`")
	loads := fs.String("loads", "0.5,1.5,6", "offered loads, in multiples of one core's vanilla capacity at --size")
	jsonOut := fs.String("json", "", "write the prediction (or validation) to `OUT` as JSON")
	svgOut := fs.String("svg", "", "draw the prediction into `OUT.svg`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.Usagef("%s", err)
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if (*validate == "") == (*calFile == "") {
		return cli.Usagef("want one of --validate FILE and --calibration FILE")
	}
	if *strict && *validate == "" {
		return cli.Usagef("--strict belongs to --validate")
	}
	if *validate != "" {
		if *svgOut != "" {
			return cli.Usagef("--svg draws a prediction; --validate prints a table")
		}
		return simValidate(*validate, *strict, *jsonOut)
	}
	pc := sim.PredictConfig{Size: *size, Modes: schema.SplitModes(*modes)}
	var err error
	if pc.Cores, err = intList("cores", *cores); err != nil {
		return err
	}
	if pc.Flows, err = intList("flows", *flows); err != nil {
		return err
	}
	if pc.Loads, err = floatList("loads", *loads); err != nil {
		return err
	}
	if err := pc.Check(); err != nil {
		return cli.Usagef("%s", err)
	}
	return simPredict(*calFile, pc, *jsonOut, *svgOut)
}

// simValidate checks the model against the calibration file's held-out
// rounds.
func simValidate(file string, strict bool, jsonOut string) error {
	cal, err := readCalibration(file)
	if err != nil {
		return err
	}
	v, err := sim.Validate(cal, strict)
	if err != nil {
		return err
	}
	fmt.Fprint(simOut, v.Text())
	if err := writeJSON(jsonOut, v); err != nil {
		return err
	}
	if !v.Pass {
		return fmt.Errorf("validation failed: %d of %d checks failed, %d unresolved (largest error %.1f %%, limit %d %%)",
			v.Failed, len(v.Checks), v.Unresolved, v.MaxErrPct, sim.MaxValidationErrPct)
	}
	return nil
}

// simPredict predicts pc from the calibration file, and prints and
// writes the prediction.
func simPredict(calFile string, pc sim.PredictConfig, jsonOut, svgOut string) error {
	cal, err := readCalibration(calFile)
	if err != nil {
		return err
	}
	p, err := sim.Predict(cal, calFile, pc, func(done, total int) {
		if done%10 == 0 || done == total {
			fmt.Fprintf(os.Stderr, "\rfalcon sim: %d/%d cases", done, total)
		}
		if done == total {
			fmt.Fprintln(os.Stderr)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprint(simOut, p.Text())
	if err := writeJSON(jsonOut, p); err != nil {
		return err
	}
	return writeChart("sim", svgOut, func(w io.Writer) error { return sim.WriteSVG(w, p) })
}

func readCalibration(path string) (*sim.Calibration, error) {
	f, err := schema.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cal, err := sim.Calibrate(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cal, nil
}

func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func intList(name, s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, cli.Usagef("--%s %q: want whole numbers, comma-separated", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func floatList(name, s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, cli.Usagef("--%s %q: want numbers, comma-separated", name, s)
		}
		out = append(out, x)
	}
	return out, nil
}
