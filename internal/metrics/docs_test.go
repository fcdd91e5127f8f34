package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/METRICS.md documents exactly the metrics the collector can expose,
// with their types and labels.
func TestMetricsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(falcon_[a-z0-9_]+)` \\| (\\w+) \\| ([^|]*) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = m[2] + " " + strings.TrimSpace(m[3])
	}
	for _, d := range defs {
		kind := map[bool]string{true: "counter", false: "gauge"}[d.kind == 1]
		labels := "—"
		if len(d.labels) > 0 {
			labels = "`" + strings.Join(d.labels, "`, `") + "`"
		}
		if got, ok := documented[d.name]; !ok {
			t.Errorf("%s is not in docs/METRICS.md", d.name)
		} else if want := kind + " " + labels; got != want {
			t.Errorf("docs/METRICS.md: %s is %q, the collector's is %q", d.name, got, want)
		}
		delete(documented, d.name)
	}
	for name := range documented {
		t.Errorf("docs/METRICS.md documents %s, which the collector does not expose", name)
	}
}

// The Grafana dashboard queries only metrics that exist.
func TestDashboardUsesExistingMetrics(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/falcon.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("deploy/grafana/falcon.json: %v", err)
	}
	name := regexp.MustCompile(`\bfalcon_[a-z0-9_]+`)
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				used++
				if !slices.Contains(Names(), n) {
					t.Errorf("panel %q queries %s, which the collector does not expose", p.Title, n)
				}
			}
		}
	}
	if used < 5 {
		t.Errorf("the dashboard queries only %d falcon metrics", used)
	}
}
