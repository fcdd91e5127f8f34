// Package stats summarises repeated benchmark runs: mean with a Student-t
// 95 % confidence interval, and ratios to a baseline.
package stats

import "math"

// Summary describes a sample of runs. CI95 is the half width of the
// two-sided 95 % Student-t interval of the mean (0 when N < 2: one run
// says nothing about spread). StdDev is the sample standard deviation.
type Summary struct {
	Mean   float64 `json:"mean"`
	CI95   float64 `json:"ci95"`
	StdDev float64 `json:"stddev"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
	// Geometric: Mean is the geometric mean and [Lo, Hi] its 95 %
	// interval (GeoSummarize); CI95 is then the larger of its two sides.
	Geometric bool    `json:"geometric,omitempty"`
	Lo        float64 `json:"lo,omitempty"`
	Hi        float64 `json:"hi,omitempty"`
}

// Summarize computes the Summary of xs. NaN and ±Inf are left out (they
// cannot be written as JSON), and N counts only the values used; an empty
// sample gives the zero Summary.
func Summarize(xs []float64) Summary {
	var s Summary
	var sum float64
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		if s.N == 0 || x < s.Min {
			s.Min = x
		}
		if s.N == 0 || x > s.Max {
			s.Max = x
		}
		sum += x
		s.N++
	}
	if s.N == 0 {
		return Summary{}
	}
	s.Mean = sum / float64(s.N)
	if s.N < 2 {
		return s
	}
	var ss float64 // second pass: no cancellation on large, close values
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		ss += (x - s.Mean) * (x - s.Mean)
	}
	s.StdDev = math.Sqrt(ss / float64(s.N-1))
	s.CI95 = TQuantile975(s.N-1) * s.StdDev / math.Sqrt(float64(s.N))
	return s
}

// GeoSummarize summarises ratios (each run divided by its paired
// baseline run) by their geometric mean: the arithmetic mean of ratios is
// biased up by about their squared coefficient of variation (a/b and b/a
// cannot both average 1), the geometric mean is not, and it is the same
// whichever side is divided by which. The interval is Student-t on the
// logs, mapped back, so it is not symmetric: Lo and Hi hold it, and CI95
// its larger side. StdDev, Min and Max are the ratios' own. A ratio that
// is not positive (a run that delivered nothing) has no logarithm: the
// sample is then summarised arithmetically, as Summarize does.
func GeoSummarize(ratios []float64) Summary {
	s := Summarize(ratios)
	var logs []float64
	for _, x := range ratios {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		if x <= 0 {
			return s
		}
		logs = append(logs, math.Log(x))
	}
	if len(logs) == 0 {
		return s
	}
	l := Summarize(logs)
	s.Geometric = true
	s.Mean, s.Lo, s.Hi = math.Exp(l.Mean), math.Exp(l.Mean-l.CI95), math.Exp(l.Mean+l.CI95)
	s.CI95 = max(s.Hi-s.Mean, s.Mean-s.Lo)
	return s
}

// Interval is the 95 % interval of the mean: [Lo, Hi] for a geometric
// summary, mean ∓ CI95 otherwise.
func (s Summary) Interval() (lo, hi float64) {
	if s.Geometric {
		return s.Lo, s.Hi
	}
	return s.Mean - s.CI95, s.Mean + s.CI95
}

// t975 holds the 0.975 quantiles of Student's t for 1..30 degrees of
// freedom (scipy.stats.t.ppf(0.975, df)).
var t975 = [...]float64{
	12.7062047364321, 4.30265272991127, 3.18244630528426, 2.7764451051978, 2.57058183661474,
	2.44691184879168, 2.3646242510103, 2.30600413503337, 2.26215716274099, 2.22813885196494,
	2.20098516008295, 2.17881282966342, 2.16036865646101, 2.14478668791693, 2.13144954555932,
	2.11990529922101, 2.10981557783318, 2.10092204024096, 2.09302405440826, 2.08596344726584,
	2.07961384472766, 2.07387306790401, 2.06865761041904, 2.06389856162802, 2.05953855275329,
	2.05552943864287, 2.05183051648028, 2.04840714179524, 2.0452296421327, 2.04227245630124,
}

// TQuantile975 is the 0.975 quantile of Student's t with df degrees of
// freedom: exact for df <= 30, and beyond that the Cornish-Fisher expansion
// around the normal quantile (Abramowitz & Stegun 26.7.5), which is within
// 1e-6 of the exact value there. df < 1 gives NaN.
func TQuantile975(df int) float64 {
	if df < 1 {
		return math.NaN()
	}
	if df <= len(t975) {
		return t975[df-1]
	}
	const z = 1.959963984540054 // normal 0.975 quantile
	n := float64(df)
	z2 := z * z
	g1 := (z2 + 1) * z / 4
	g2 := ((5*z2+16)*z2 + 3) * z / 96
	g3 := (((3*z2+19)*z2+17)*z2 - 15) * z / 384
	g4 := ((((79*z2+776)*z2+1482)*z2-1920)*z2 - 945) * z / 92160
	return z + g1/n + g2/(n*n) + g3/(n*n*n) + g4/(n*n*n*n)
}

// Normalize expresses x relative to base, the way results are reported
// against the host (or vanilla) baseline. Mean, Min and Max are divided by
// base.Mean. The uncertainty of the ratio r = x/b is propagated to first
// order with the two samples taken as independent:
//
//	σr² = (σx/b)² + (x·σb/b²)²  (= r²·((σx/x)² + (σb/b)²): relative errors in quadrature)
//
// applied both to CI95 and StdDev. N is x.N. A zero base mean has no ratio:
// the result is then the zero Summary with N = x.N.
func Normalize(x, base Summary) Summary {
	b := base.Mean
	if b == 0 {
		return Summary{N: x.N}
	}
	prop := func(ex, eb float64) float64 {
		return math.Hypot(ex/b, x.Mean*eb/(b*b))
	}
	lo, hi := x.Min/b, x.Max/b
	if b < 0 {
		lo, hi = hi, lo
	}
	return Summary{
		Mean:   x.Mean / b,
		CI95:   prop(x.CI95, base.CI95),
		StdDev: prop(x.StdDev, base.StdDev),
		Min:    lo,
		Max:    hi,
		N:      x.N,
	}
}
