package sim

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/falconnet/falcon/lab/report"
)

// HTMLSection is a prediction's part of falcon-lab report's page: labelled
// SIMULATED in its title, its banner and its chart, with the model's
// calibration and placement where a results file states its machine and
// method.
func (p Prediction) HTMLSection(source string) (report.HTMLSection, error) {
	var svg strings.Builder
	if err := WriteSVG(&svg, p); err != nil {
		return report.HTMLSection{}, err
	}
	created := "not recorded"
	if !p.Created.IsZero() {
		created = p.Created.UTC().Format("2006-01-02 15:04:05 MST")
	}
	return report.HTMLSection{
		Title:  "SIMULATED: " + filepath.Base(source),
		Source: source,
		Banner: SimulatedLabel,
		Facts: []report.Fact{
			{Name: "Calibration", Value: p.Calibration},
			{Name: "Placement (modelled)", Value: p.Placement},
			{Name: "Size", Value: fmt.Sprintf("%d B UDP", p.Size)},
			{Name: "Method", Value: "falcon-lab sim's discrete-event model of the receive path with the stage costs measured by the calibration; no packet was sent"},
			{Name: "Created", Value: created + "; falcon " + p.FalconVersion},
		},
		Charts: []report.Chart{{Kind: "simulated",
			Title: "SIMULATED: delivered rate over cores, p99 latency over offered load, and the ratio to vanilla (dashed red: FALCON Fig. 13)",
			SVG:   svg.String()}},
		Pre: p.Text(),
	}, nil
}
