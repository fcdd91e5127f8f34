package metrics

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func itoa(i int) string { return strconv.Itoa(i) }

// isRuntime: the Go and process collectors registered beside falcon's.
func isRuntime(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
}

// matches: m's labels include want.
func matches(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
			return false
		}
	}
	return true
}

// total adds the counters of family name whose labels include want.
func total(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var v float64
	for _, m := range fams[name].GetMetric() {
		if matches(m, want) {
			v += m.GetCounter().GetValue()
		}
	}
	return v
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
