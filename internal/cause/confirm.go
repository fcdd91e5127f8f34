package cause

import (
	"fmt"
	"slices"
)

// Confirming by cost, not by rate. Once engaged, a hop must make the
// bottleneck CPU's work per delivered packet cheaper (its busy ticks per
// packet fall by confirmMargin), and not lose packets: the drop share must
// not rise and, while the bottleneck stays saturated or dropping, the
// delivered rate must not fall. Both are ratios a swing of the offered load
// leaves alone: unsaturated, busy time and packets rise and fall together
// (a 1.5 x load gives the same cost per packet); saturated, the rate is the
// bottleneck's capacity, whatever is offered above it. A rate A/B of 150 ms
// windows was not: on 16 vCPUs delivery swung 1.5 x between rounds of one
// load and the test stood falcon down in most of them.
//
// The test is sequential over windows of the agent's loop: the first
// engaged window (the switch itself) is skipped; from confirmMin on, a
// clear majority of windows decides; at confirmMax an undecided test fails.
const (
	confirmMargin = 0.05
	confirmMin    = 1000.0 // ms
	confirmMax    = 3000.0 // ms
	// minDelivered: a window with fewer packets has no cost to speak of.
	minDelivered = 100
	// rateSlack and lossSlack: what counts as "fell" and "rose".
	rateSlack = 0.03
	lossSlack = 0.01
)

// Outcome of a confirmation.
const (
	Pending = "pending"
	Pays    = "pays"
	Fails   = "fails"
)

// Confirmation is Confirm's judgement and its figures.
type Confirmation struct {
	Outcome string `json:"outcome"`
	// BaseCost and Cost: the bottleneck's busy ticks per 1000 delivered
	// packets, medians over the windows before and while engaged.
	BaseCost float64 `json:"base_cost"`
	Cost     float64 `json:"cost"`
	// BaseRate and Rate: delivered packets per second, medians.
	BaseRate float64 `json:"base_rate"`
	Rate     float64 `json:"rate"`
	// Wins and Losses: engaged windows cheaper by the margin, and those
	// no cheaper or losing packets.
	Wins   int     `json:"wins"`
	Losses int     `json:"losses"`
	Ms     float64 `json:"ms"` // engaged time judged
	Why    string  `json:"why"`
}

type judged struct{ cost, rate, loss float64 }

func judge(w Window, bn int) (judged, bool) {
	if w.Delivered < minDelivered || w.Ms <= 0 {
		return judged{}, false
	}
	var ticks, drops uint64
	for _, c := range w.CPUs {
		drops += c.Dropped
		if c.ID == bn {
			ticks = c.BusyTicks
		}
	}
	drops += w.SockDrops
	return judged{cost: 1000 * float64(ticks) / float64(w.Delivered),
		rate: 1000 * float64(w.Delivered) / w.Ms,
		loss: float64(drops) / float64(drops+w.Delivered)}, true
}

// Confirm judges engaged windows (the first, the switch, already left
// out) against the baseline windows before them, for bottleneck CPU bn.
func Confirm(bn int, threshold float64, base, engaged []Window) Confirmation {
	var b []judged
	for _, w := range base {
		if j, ok := judge(w, bn); ok {
			b = append(b, j)
		}
	}
	baseMs := usableMs(base, bn)
	c := Confirmation{Outcome: Pending}
	if baseMs < confirmMin {
		c.Outcome, c.Why = Fails, fmt.Sprintf("baseline of %.0f ms with traffic, under %.0f ms", baseMs, confirmMin)
		return c
	}
	c.BaseCost, c.BaseRate = median(b, func(j judged) float64 { return j.cost }), median(b, func(j judged) float64 { return j.rate })
	baseLoss := median(b, func(j judged) float64 { return j.loss })
	var e []judged
	for _, w := range engaged {
		c.Ms += w.Ms
		j, ok := judge(w, bn)
		if !ok {
			c.Losses++ // no traffic to speak of while engaged: nothing gained
			continue
		}
		e = append(e, j)
		pressed := saturated(w, bn, threshold)
		switch {
		case j.loss > baseLoss+lossSlack, pressed && j.rate < c.BaseRate*(1-rateSlack), j.cost >= c.BaseCost:
			c.Losses++
		case j.cost <= c.BaseCost*(1-confirmMargin):
			c.Wins++
		}
	}
	if len(e) > 0 {
		c.Cost, c.Rate = median(e, func(j judged) float64 { return j.cost }), median(e, func(j judged) float64 { return j.rate })
	}
	n := c.Wins + c.Losses
	switch {
	case c.Ms < confirmMin:
	case 4*c.Wins >= 3*max(n, 5):
		c.Outcome = Pays
	case 2*c.Losses > n || c.Ms >= confirmMax:
		c.Outcome = Fails
	}
	c.Why = fmt.Sprintf("cost %.2f against %.2f busy ticks per 1000 packets, %.0f against %.0f packets/s; %d windows cheaper, %d not, over %.0f ms",
		c.Cost, c.BaseCost, c.Rate, c.BaseRate, c.Wins, c.Losses, c.Ms)
	return c
}

func saturated(w Window, bn int, threshold float64) bool {
	for _, c := range w.CPUs {
		if c.ID == bn {
			return c.Busy >= threshold || c.Dropped+c.Squeezed > 0
		}
	}
	return false
}

func median(js []judged, f func(judged) float64) float64 {
	if len(js) == 0 {
		return 0
	}
	xs := make([]float64, len(js))
	for i, j := range js {
		xs[i] = f(j)
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
