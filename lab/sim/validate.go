package sim

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stats"
)

// MaxValidationErrPct is the largest error of a predicted ratio that
// validation accepts.
const MaxValidationErrPct = 15

// Check is one mode's predicted ratio to vanilla against the ratio the
// calibration file measured in its held-out rounds (paired round by
// round).
type Check struct {
	Mode      string        `json:"mode"`
	Size      int           `json:"size"`
	Measured  stats.Summary `json:"measured"`
	Predicted float64       `json:"predicted"`
	ErrPct    float64       `json:"err_pct"`
	Verdict   string        `json:"verdict"` // ok, unresolved or fail (judge)
}

// The verdicts of a check. A check whose prediction is off by more than
// the limit but inside the held-out runs' 95 % interval, itself wider than
// the limit, is unresolved: those runs cannot tell such an error from
// their own spread, and more rounds would.
const (
	VerdictOK         = "ok"
	VerdictUnresolved = "unresolved"
	VerdictFail       = "fail"
)

func (c *Check) judge(strict bool) {
	lo, hi := c.Measured.Interval()
	wide := c.Measured.Mean > 0 && (hi-lo)/2 > MaxValidationErrPct/100.0*c.Measured.Mean
	switch {
	case c.ErrPct <= MaxValidationErrPct:
		c.Verdict = VerdictOK
	case !strict && wide && c.Predicted >= lo && c.Predicted <= hi:
		c.Verdict = VerdictUnresolved
	default:
		c.Verdict = VerdictFail
	}
}

// Validation is every check, with vanilla's absolute rate beside (shown,
// not judged: the ratios are what predictions are used for).
type Validation struct {
	Machine   string    `json:"machine"`
	Costs     CostTable `json:"costs"`
	Checks    []Check   `json:"checks"`
	Vanilla   []Check   `json:"vanilla_pps"`
	MaxErrPct float64   `json:"max_err_pct"`
	// Counts of the verdicts; Pass: no check failed and most were
	// resolved (with Strict, every check within the limit).
	OK         int      `json:"ok"`
	Unresolved int      `json:"unresolved"`
	Failed     int      `json:"failed"`
	Strict     bool     `json:"strict"`
	Pass       bool     `json:"pass"`
	Notes      []string `json:"notes"`
}

// simSeeds are the seeds each prediction averages over: RPS's hash and the
// flows' ports differ from run to run on a real machine too.
const simSeeds = 12

// calSetup is the calibration machine as the model sees it.
func (c *Calibration) setup(mode Mode, size int) Setup {
	cfg := c.File.Config
	p := Placement{Sender: cfg.SenderCPUs, Receiver: cfg.ReceiverCPUs, Falcon: cfg.FalconCPUs, NIC: -1}
	if cfg.NICCPU != nil {
		p.NIC = *cfg.NICCPU
	}
	cores := c.File.Machine.Cores
	for _, set := range [][]int{p.Sender, p.Receiver, p.Falcon, {p.NIC}} {
		for _, x := range set {
			cores = max(cores, x+1)
		}
	}
	return Setup{CPUs: cores, Place: p, Mode: mode, Flows: 1, Size: size,
		Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond}
}

// average runs s over simSeeds seeds.
func average(s Setup, c Costs) (Outcome, error) {
	var sum Outcome
	for seed := int64(1); seed <= simSeeds; seed++ {
		s.Seed = seed
		o, err := Run(s, c)
		if err != nil {
			return Outcome{}, err
		}
		sum.PPS += o.PPS / simSeeds
		sum.SentPPS += o.SentPPS / simSeeds
		sum.P50Us += o.P50Us / simSeeds
		sum.P99Us += o.P99Us / simSeeds
		sum.Reordered += o.Reordered
	}
	return sum, nil
}

// Validate predicts every mode of the calibration file and compares with
// its held-out rounds.
func Validate(c *Calibration, strict bool) (Validation, error) {
	m := c.File.Machine
	v := Validation{Strict: strict, Machine: fmt.Sprintf("%d CPUs (%s), kernel %s, %s", m.Cores, m.CPUModel, m.Kernel, orNone(m.Virt)),
		Costs: c.Costs, Notes: append([]string{"ratios: held-out (even) rounds, each divided by vanilla's run of its round; " +
			"predictions: the model with the odd rounds' costs, the calibration's placement, mean of 12 seeds"}, c.Notes...)}
	for _, cost := range c.Costs {
		van, err := ParseMode(schema.Vanilla)
		if err != nil {
			return v, err
		}
		base, err := average(c.setup(van, cost.Size), cost)
		if err != nil {
			return v, err
		}
		vr := runs(c.result(schema.Vanilla, cost.Size), false)
		if len(vr) == 0 {
			return v, fmt.Errorf("size %d: no held-out vanilla run", cost.Size)
		}
		var pps []float64
		for _, r := range vr {
			pps = append(pps, r.PPS)
		}
		meas := stats.Summarize(pps)
		v.Vanilla = append(v.Vanilla, Check{Mode: schema.Vanilla, Size: cost.Size, Measured: meas, Predicted: base.PPS,
			ErrPct: errPct(base.PPS, meas.Mean)})
		for _, name := range c.Modes() {
			if name == schema.Vanilla {
				continue
			}
			mode, err := ParseMode(name)
			if err != nil {
				return v, fmt.Errorf("the calibration file's mode %s: %w", name, err)
			}
			ratios := pairedRatios(c.result(name, cost.Size), vr)
			if len(ratios) == 0 {
				v.Notes = append(v.Notes, fmt.Sprintf("%s at %d B: no held-out run, not checked", name, cost.Size))
				continue
			}
			o, err := average(c.setup(mode, cost.Size), cost)
			if err != nil {
				return v, err
			}
			meas := stats.Summarize(ratios)
			pred := o.PPS / base.PPS
			ch := Check{Mode: name, Size: cost.Size, Measured: meas, Predicted: pred, ErrPct: errPct(pred, meas.Mean)}
			ch.judge(strict)
			switch ch.Verdict {
			case VerdictOK:
				v.OK++
			case VerdictUnresolved:
				v.Unresolved++
			default:
				v.Failed++
			}
			v.Checks = append(v.Checks, ch)
			v.MaxErrPct = max(v.MaxErrPct, ch.ErrPct)
		}
	}
	if len(v.Checks) == 0 {
		return v, fmt.Errorf("nothing to validate: the calibration file has no held-out runs of a mode besides vanilla")
	}
	v.Pass = v.Failed == 0 && v.Unresolved < v.OK
	return v, nil
}

// pairedRatios divides each held-out run of r by vanilla's run of the same
// round.
func pairedRatios(r *schema.Result, vanilla []schema.Run) []float64 {
	byRound := map[int]float64{}
	for _, run := range vanilla {
		byRound[run.Round] = run.PPS
	}
	var out []float64
	for _, run := range runs(r, false) {
		if base := byRound[run.Round]; base > 0 && run.Round > 0 {
			out = append(out, run.PPS/base)
		}
	}
	return out
}

func errPct(pred, meas float64) float64 {
	if meas == 0 {
		return math.Inf(1)
	}
	return 100 * math.Abs(pred-meas) / meas
}

func orNone(s string) string {
	if s == "" {
		return "no virtualisation detected"
	}
	return s
}

// Text is the validation as a table.
func (v Validation) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "SIMULATED vs MEASURED on %s\n", v.Machine)
	b.WriteString(v.Costs.Text())
	fmt.Fprintf(&b, "%-26s %6s  %-22s %9s %7s  %s\n", "mode", "size", "measured (95% CI)", "predicted", "error", "verdict")
	for _, c := range v.Vanilla {
		lo, hi := c.Measured.Interval()
		fmt.Fprintf(&b, "%-26s %6d  %-22s %9s %6.1f%%  (pps, shown only)\n", c.Mode, c.Size,
			fmt.Sprintf("%.0f (%.0f-%.0f)", c.Measured.Mean, lo, hi), fmt.Sprintf("%.0f", c.Predicted), c.ErrPct)
	}
	for _, c := range v.Checks {
		lo, hi := c.Measured.Interval()
		fmt.Fprintf(&b, "%-26s %6d  %-22s %9.2f %6.1f%%  %s\n", c.Mode, c.Size,
			fmt.Sprintf("%.2f (%.2f-%.2f)", c.Measured.Mean, lo, hi), c.Predicted, c.ErrPct, c.Verdict)
	}
	verdict := "PASS"
	if !v.Pass {
		verdict = "FAIL"
	}
	rule := "no check fails, and fewer are unresolved than within the limit"
	if v.Strict {
		rule = "every check within the limit (--strict)"
	}
	fmt.Fprintf(&b, "largest error of a ratio: %.1f%% (limit %d%%); %d within, %d unresolved (inside a held-out interval wider than the limit), "+
		"%d failed; pass when %s: %s\n", v.MaxErrPct, MaxValidationErrPct, v.OK, v.Unresolved, v.Failed, rule, verdict)
	for _, n := range v.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}
