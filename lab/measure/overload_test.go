package measure

import (
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
)

// receiver models a sender of at most sender messages/s into a receiver
// that takes capacity/s and drops the rest (collapsing to flooded/s when
// sent flat out, if flooded is set).
func receiver(capacity, sender, flooded float64) func(float64) (schema.OverloadStep, error) {
	return func(target float64) (schema.OverloadStep, error) {
		st := schema.OverloadStep{Mode: "under-load", TargetPPS: target, SentPPS: min(target, sender)}
		recv := min(st.SentPPS, capacity)
		if target == 0 {
			st.Mode, st.SentPPS, recv = "throughput", sender, min(sender, capacity)
			if flooded > 0 {
				recv = flooded
			}
		}
		st.Sent, st.Received = int64(st.SentPPS), int64(recv)
		st.LossPct = lossPct(st.Sent, st.Received)
		st.Pass = st.LossPct <= schema.OverloadMaxLossPct
		return st, nil
	}
}

func TestSearchRate(t *testing.T) {
	for _, c := range []struct {
		name                      string
		capacity, sender, flooded float64
		lo, hi                    float64
		senderLimited             bool
		maxSteps                  int
	}{
		{"receiver the limit", 300e3, 1e6, 0, 300e3 * (1 - schema.OverloadPrecision), 300e3, false, 4},
		{"sender the limit", 2e6, 1e6, 0, 1e6, 1e6, true, 1},
		{"receiver collapses when flooded", 300e3, 1e6, 150e3, 300e3 * (1 - schema.OverloadPrecision), 300e3, false, overloadMaxSteps + 1},
	} {
		s, err := searchRate(receiver(c.capacity, c.sender, c.flooded), false)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.RatePPS < c.lo || s.RatePPS > c.hi || s.SenderLimited != c.senderLimited || len(s.Steps) > c.maxSteps || len(s.Steps) == 0 {
			t.Errorf("%s: found %.0f/s (sender-limited %v) in %d steps; want %.0f..%.0f, sender-limited %v, at most %d steps: %s",
				c.name, s.RatePPS, s.SenderLimited, len(s.Steps), c.lo, c.hi, c.senderLimited, c.maxSteps, stepsLine(s.Steps))
		}
		if s.Steps[0].Mode != "throughput" || s.MaxLossPct != schema.OverloadMaxLossPct {
			t.Errorf("%s: first step %+v", c.name, s.Steps[0])
		}
	}
	// A sender that cannot reach the rates it is asked for (here: from
	// 500k/s up, while flat out it made 1M/s) stops the search where the
	// receiver kept up with it.
	short := func(target float64) (schema.OverloadStep, error) {
		st, _ := receiver(600e3, 1e6, 0)(target)
		if target >= 500e3 {
			st.SentPPS, st.Sent, st.Received, st.LossPct, st.Pass = 450e3, 450e3, 450e3, 0, true
		}
		return st, nil
	}
	if s, err := searchRate(short, false); err != nil || s.RatePPS != 450e3 || !s.SenderLimited {
		t.Errorf("short sender: %+v, %v", s, err)
	}
	// Drops everywhere: an error naming the steps.
	lossy := func(target float64) (schema.OverloadStep, error) {
		st, _ := receiver(1e6, 1e6, 0)(target)
		st.Received, st.LossPct, st.Pass = st.Sent/2, 50, false
		return st, nil
	}
	if s, err := searchRate(lossy, false); err == nil || !strings.Contains(err.Error(), "no rate passed") || len(s.Steps) != overloadMaxSteps+1 {
		t.Errorf("drops everywhere: %+v, %v", s, err)
	}
	// TCP: the flat-out rate is probed, and passes where the sender keeps it.
	tcp := func(target float64) (schema.OverloadStep, error) {
		st, _ := receiver(200e3, 200e3, 0)(target)
		st.Pass = target == 0 || st.SentPPS >= overloadSenderShort*target
		return st, nil
	}
	if s, err := searchRate(tcp, true); err != nil || s.RatePPS != 200e3 || s.SenderLimited || len(s.Steps) != 2 {
		t.Errorf("tcp: %+v, %v", s, err)
	}
}
