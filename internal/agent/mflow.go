package agent

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/quote"
)

// DefaultBatch is MFLOW's micro-flow: 256 packets, from which the paper
// found little reordering left (its Fig. 7).
const DefaultBatch = 256

// DefaultElephant is the rate from which mode mflow splits a flow:
// 1 Gbit/s. At the stage costs measured here (1.0-1.9 us per 1448-byte
// segment and stage, bench --stage-cost) such a flow takes its three
// stages about 40 % of one core; a slower one leaves nothing to relieve
// that reordering would pay for (docs/split-and-mflow.md#micro-flows---mode-mflow).
const DefaultElephant = 1_000_000_000

// validateMflow checks the micro-flow settings without touching the system.
func (o *Options) validateMflow() error {
	if o.Batch == 0 {
		switch {
		case o.AllowReorder:
			return errors.New("--allow-reorder needs micro-flows (mode mflow, or --batch): nothing else falcon does reorders")
		case o.Elephant != DefaultElephant:
			return errors.New("--elephant needs micro-flows (mode mflow, or --batch)")
		}
		return nil
	}
	if !o.Split {
		return errors.New("--batch needs --split (mode mflow sets both): micro-flows are made where the NIC stage is split off, before any skb exists")
	}
	if o.SplitProto == datapath.SplitUDP && !o.AllowReorder {
		return errors.New("--split-proto udp in mode mflow needs --allow-reorder: a UDP flow's micro-flows reach the socket out of order, " +
			"and UDP, unlike TCP, does not put them back in order")
	}
	return nil
}

// parseRate reads a rate in bit/s: a number with an optional k, M or G
// (powers of 1000) and an optional "bit/s" or "bps".
func parseRate(v string) (uint64, error) {
	s := strings.TrimSpace(v)
	for _, suf := range []string{"bit/s", "bps", "b/s"} {
		s = strings.TrimSuffix(s, suf)
	}
	mul := 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mul = 1e3
		case 'M':
			mul = 1e6
		case 'G':
			mul = 1e9
		}
		if mul != 1 {
			s = s[:n-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	// !(f >= 0) is true for NaN too, which every comparison refuses:
	// "NaN" would become 9223372036854775808 bit/s.
	if err != nil || !(f >= 0) || math.IsInf(f, 0) || f*mul > 1e12 {
		return 0, fmt.Errorf("%s: want a rate in bit/s such as 500M or 2G, up to 1000G", quote.Short(v))
	}
	return uint64(f*mul + 0.5), nil
}

// formatRate writes r as parseRate reads it, in the largest exact unit.
func formatRate(r uint64) string {
	for _, u := range []struct {
		div uint64
		suf string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if r >= u.div && r%u.div == 0 {
			return strconv.FormatUint(r/u.div, 10) + u.suf
		}
	}
	return strconv.FormatUint(r, 10)
}
