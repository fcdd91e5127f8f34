package stats

import (
	"encoding/json"
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Reference values: scipy.stats.t.ppf(0.975, df), scipy 1.10.1.
func TestTQuantile975(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{
		{1, 12.706204736432095}, {2, 4.302652729911275}, {4, 2.7764451051977987},
		{9, 2.2621571627409915}, {30, 2.0422724563012373},
		{31, 2.0395134463964077}, {35, 2.0301079282503425}, {40, 2.0210753829953374},
		{45, 2.0141033848332923}, {50, 2.008559109715206}, {60, 2.0002978210582616},
		{80, 1.990063421028384}, {100, 1.9839715184496334}, {120, 1.9799304050527766},
		{200, 1.9718962236316089}, {500, 1.9647198374673438}, {1000, 1.9623390808264074},
		{10000, 1.960201239890626},
	} {
		if got := TQuantile975(c.df); !near(got, c.want, 1e-6) {
			t.Errorf("TQuantile975(%d) = %.10f, want %.10f", c.df, got, c.want)
		}
	}
	if !math.IsNaN(TQuantile975(0)) || !math.IsNaN(TQuantile975(-3)) {
		t.Error("df < 1 must be NaN")
	}
}

func TestSummarize(t *testing.T) {
	// numpy: mean 11.2, std(ddof=1) 1.4404860290887933, CI 1.788599642235058
	s := Summarize([]float64{10, 12, 11.5, 9.5, 13})
	want := Summary{Mean: 11.2, CI95: 1.788599642235058, StdDev: 1.4404860290887933, Min: 9.5, Max: 13, N: 5}
	if !near(s.Mean, want.Mean, 1e-12) || !near(s.CI95, want.CI95, 1e-9) ||
		!near(s.StdDev, want.StdDev, 1e-12) || s.Min != want.Min || s.Max != want.Max || s.N != 5 {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
}

func TestSummarizeEdges(t *testing.T) {
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("empty: %+v", s)
	}
	if s := Summarize([]float64{7}); s != (Summary{Mean: 7, Min: 7, Max: 7, N: 1}) {
		t.Errorf("one value: %+v", s)
	}
	if s := Summarize([]float64{3, 3, 3}); s.CI95 != 0 || s.StdDev != 0 || s.Mean != 3 {
		t.Errorf("constant: %+v", s)
	}
	s := Summarize([]float64{1, math.NaN(), 3, math.Inf(1)})
	if s.N != 2 || s.Mean != 2 || s.Min != 1 || s.Max != 3 {
		t.Errorf("non-finite values: %+v", s)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Error(err)
	}
	// Large, close values: a one-pass sum of squares would lose them.
	s = Summarize([]float64{1e9 + 1, 1e9 + 2, 1e9 + 3})
	if !near(s.StdDev, 1, 1e-6) {
		t.Errorf("large values: stddev %v", s.StdDev)
	}
}

func TestNormalize(t *testing.T) {
	x := Summary{Mean: 50, CI95: 5, StdDev: 4, Min: 45, Max: 55, N: 5}
	base := Summary{Mean: 100, CI95: 10, StdDev: 8, Min: 90, Max: 110, N: 5}
	r := Normalize(x, base)
	// both 10 % relative: ratio 0.5 ± 0.5·√2·0.1
	if !near(r.Mean, 0.5, 1e-12) || !near(r.CI95, 0.5*math.Sqrt2*0.1, 1e-12) ||
		!near(r.StdDev, 0.5*math.Sqrt2*0.08, 1e-12) || r.Min != 0.45 || r.Max != 0.55 || r.N != 5 {
		t.Errorf("Normalize = %+v", r)
	}
	self := Normalize(base, base)
	if self.Mean != 1 {
		t.Errorf("self ratio %v", self.Mean)
	}
	// an exact baseline leaves x's own relative error
	r = Normalize(x, Summary{Mean: 10, N: 1})
	if !near(r.CI95, 0.5, 1e-12) {
		t.Errorf("exact base: %+v", r)
	}
	// x with mean 0 still carries the baseline's spread, no NaN
	r = Normalize(Summary{CI95: 1, N: 3}, base)
	if !near(r.CI95, 0.01, 1e-12) {
		t.Errorf("zero x: %+v", r)
	}
	if r := Normalize(x, Summary{N: 3}); r != (Summary{N: 5}) {
		t.Errorf("zero base: %+v", r)
	}
}

func TestGeoSummarize(t *testing.T) {
	// A against B and B against A: the arithmetic means of the ratios
	// both exceed 1 (1.25 and 1.25), the geometric ones are 1 and 1.
	ab := []float64{2, 0.5, 1}
	if s := Summarize(ab); math.Abs(s.Mean-7.0/6) > 1e-12 {
		t.Fatalf("arithmetic mean %v", s.Mean)
	}
	g := GeoSummarize(ab)
	if !g.Geometric || math.Abs(g.Mean-1) > 1e-12 || g.N != 3 || g.Min != 0.5 || g.Max != 2 {
		t.Errorf("geometric summary %+v, want mean 1 of 3 within 0.5..2", g)
	}
	// The interval is Student-t on the logs: ±4.30·sd(log)/√3, mapped back.
	h := 4.30265272991127 * math.Log(2) / math.Sqrt(3)
	if math.Abs(g.Lo-math.Exp(-h)) > 1e-9 || math.Abs(g.Hi-math.Exp(h)) > 1e-9 || math.Abs(g.CI95-(math.Exp(h)-1)) > 1e-9 {
		t.Errorf("interval [%v, %v] ±%v, want [%v, %v]", g.Lo, g.Hi, g.CI95, math.Exp(-h), math.Exp(h))
	}
	// One run's ratio: no interval.
	if g := GeoSummarize([]float64{0.8}); math.Abs(g.Mean-0.8) > 1e-12 || g.CI95 != 0 || g.Lo != 0.8 || g.Hi != 0.8 {
		t.Errorf("one ratio: %+v", g)
	}
	// A run that delivered nothing has no logarithm: arithmetic, said so.
	if g := GeoSummarize([]float64{1, 0}); g.Geometric || g.Mean != 0.5 {
		t.Errorf("with a zero ratio: %+v, want the arithmetic mean 0.5", g)
	}
	if g := GeoSummarize(nil); g != (Summary{}) {
		t.Errorf("empty: %+v", g)
	}
}
