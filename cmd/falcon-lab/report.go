package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/bench"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/report"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/sim"
)

// reportOut is where report writes the table (tests swap it).
var reportOut io.Writer = os.Stdout

func init() {
	app.Register(cli.Command{Name: "report", Summary: "print a results file's (or a falcon-lab sim prediction's) table; draw it as SVG, or several files as one HTML page", Run: runReport})
}

func runReport(args []string) error {
	fs := app.FlagSet("report", "[--svg OUT.svg] [--html DIR] [--baseline LAYOUT/MODE|auto] [--traces DIR] FILE...")
	svg := fs.String("svg", "", "also draw the normalised figures as a bar chart into `OUT.svg`")
	html := fs.String("html", "", "also write one self-contained page into `DIR`/index.html: per FILE its machine and method, charts "+
		"(SVG inline; the papers' ratios marked) and tables; nothing loaded from the network; takes several FILEs")
	baseline := fs.String("baseline", "", "normalise against this instead of what the file records (LAYOUT/MODE or auto)")
	traces := fs.String("traces", "", "also write each run's decisions by cause (the adaptive policy's inputs and verdicts) into `DIR`, "+
		"one replayable trace a run (internal/cause's Trace JSON); takes one FILE")
	// The file may come before or after the flags.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return cli.Usagef("%s", err)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(files) == 0 || len(files) > 1 && *html == "":
		return cli.Usagef("want one results file (several with --html), got %d", len(files))
	case len(files) > 1 && *svg != "":
		return cli.Usagef("--svg draws one file's chart; for several files, --html")
	case len(files) > 1 && *traces != "":
		return cli.Usagef("--traces writes one file's traces")
	}
	if err := checkHTMLDir(*html); err != nil {
		return err
	}
	var sections []report.HTMLSection
	for i, name := range files {
		if len(files) > 1 {
			if i > 0 {
				fmt.Fprintln(reportOut)
			}
			fmt.Fprintf(reportOut, "## %s\n\n", name)
		}
		sec, err := reportFile(name, *svg, *baseline, *html != "")
		if err != nil {
			return err
		}
		sections = append(sections, sec)
	}
	if *traces != "" {
		if err := writeTraces(*traces, files[0]); err != nil {
			return err
		}
	}
	if *html != "" {
		return writeReportPage(*html, files, sections)
	}
	return nil
}

// writeTraces writes a results file's decisions by cause, a trace a run.
func writeTraces(dir, name string) error {
	f, err := schema.ReadFile(name)
	if err != nil {
		return err
	}
	ts := f.CauseTraces()
	if len(ts) == 0 {
		fmt.Fprintf(os.Stderr, "falcon-lab report: %s recorded no decision by cause\n", name)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for file, t := range ts {
		b, err := json.MarshalIndent(t, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "falcon-lab report: %d traces of decisions by cause in %s\n", len(ts), dir)
	return nil
}

// reportFile prints the table of one results or prediction file, draws
// its chart into svg when one is given, and returns its section of the
// HTML page when html is set.
func reportFile(name, svg, baseline string, html bool) (report.HTMLSection, error) {
	if b, err := os.ReadFile(name); err == nil {
		if p, ok, err := sim.ReadPrediction(b); ok {
			if err != nil {
				return report.HTMLSection{}, fmt.Errorf("%s: %w", name, err)
			}
			if err := reportPrediction(p, svg, baseline); err != nil || !html {
				return report.HTMLSection{}, err
			}
			return p.HTMLSection(name)
		}
	}
	f, err := schema.ReadFile(name)
	if err != nil {
		return report.HTMLSection{}, err
	}
	if baseline != "" {
		b := baseline
		if b != "auto" && !strings.Contains(b, "/") {
			b += "/" + schema.Vanilla
		}
		schema.Normalize(f.Results, b)
	}
	if err := writeChart("report", svg, func(w io.Writer) error { return render.WriteSVG(w, f) }); err != nil {
		return report.HTMLSection{}, err
	}
	if err := render.WriteTable(reportOut, f); err != nil || !html {
		return report.HTMLSection{}, err
	}
	return render.FileSection(name, f, bench.PresetSummary(f.Config.Preset))
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
	fmt.Fprintf(os.Stderr, "falcon-lab %s: chart in %s\n", cmd, path)
	return nil
}

// reportPrediction prints and draws a falcon-lab sim prediction: simulated,
// and labelled so in both.
func reportPrediction(p sim.Prediction, svg, baseline string) error {
	if baseline != "" {
		return cli.Usagef("--baseline: a prediction is drawn against its own vanilla")
	}
	if err := writeChart("report", svg, func(w io.Writer) error { return sim.WriteSVG(w, p) }); err != nil {
		return err
	}
	_, err := io.WriteString(reportOut, p.Text())
	return err
}
