package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/falconnet/falcon/internal/bench"
	"github.com/falconnet/falcon/internal/sim"
)

// reportOut is where report writes the table (tests swap it).
var reportOut io.Writer = os.Stdout

func init() {
	register(command{name: "report", summary: "print a results file's (or a falcon sim prediction's) table; draw it as SVG", run: runReport})
}

func runReport(args []string) error {
	fs := newFlagSet("report", "[--svg OUT.svg] [--baseline LAYOUT/MODE|auto] FILE")
	svg := fs.String("svg", "", "also draw the normalised figures as a bar chart into `OUT.svg`")
	baseline := fs.String("baseline", "", "normalise against this instead of what the file records (LAYOUT/MODE or auto)")
	// The file may come before or after the flags.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usagef("%s", err)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		return usagef("want one results file, got %d", len(files))
	}
	if b, err := os.ReadFile(files[0]); err == nil {
		if p, ok, err := sim.ReadPrediction(b); ok {
			if err != nil {
				return fmt.Errorf("%s: %w", files[0], err)
			}
			return reportPrediction(p, *svg, *baseline)
		}
	}
	f, err := bench.ReadFile(files[0])
	if err != nil {
		return err
	}
	if *baseline != "" {
		b := *baseline
		if b != "auto" && !strings.Contains(b, "/") {
			b += "/vanilla"
		}
		bench.Normalize(f.Results, b)
	}
	if err := writeChart("report", *svg, func(w io.Writer) error { return bench.WriteSVG(w, f) }); err != nil {
		return err
	}
	return bench.WriteTable(reportOut, f)
}

// writeChart draws into path, when one is given, and says where: the whole
// chart or nothing, so a failed drawing leaves no half file.
func writeChart(cmd, path string, draw func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := draw(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "falcon %s: chart in %s\n", cmd, path)
	return nil
}

// reportPrediction prints and draws a falcon sim prediction: simulated,
// and labelled so in both.
func reportPrediction(p sim.Prediction, svg, baseline string) error {
	if baseline != "" {
		return usagef("--baseline: a prediction is drawn against its own vanilla")
	}
	if err := writeChart("report", svg, func(w io.Writer) error { return sim.WriteSVG(w, p) }); err != nil {
		return err
	}
	_, err := io.WriteString(reportOut, p.Text())
	return err
}
