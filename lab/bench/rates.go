package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/falconnet/falcon/lab/measure"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// The flags of the rates workloads (lab/measure/rates.go drives them)
// and of hotspot's light rate.

// DefaultRates is --rates when it is not given.
const DefaultRates = "100M,500M,1G,2G"

// parseRates reads --rates: rates in the order given, each once.
func parseRates(s string) ([]string, error) {
	var out []string
	for _, f := range splitList(s) {
		r, err := workload.ParseRate(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, r.String()) {
			out = append(out, r.String())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rates given")
	}
	return out, nil
}

// usesWorkload says whether any --workloads entry is run by driver d.
func usesWorkload(c schema.Config, d workload.Driver) bool {
	for _, entry := range c.Workloads {
		name, _, _ := strings.Cut(entry, ":")
		if w, _ := workload.Lookup(name); w.Driver == d {
			return true
		}
	}
	return false
}

// resolveRates checks --rates and --hotspot-rate, and keeps each in the
// config where a workload runs at it (so a config without those workloads
// reads as before they existed).
func (f *Flags) resolveRates(c *schema.Config) error {
	rates, err := parseRates(f.rates)
	if err != nil {
		return configErrorf("--rates: %v", err)
	}
	hot, err := workload.ParseRate(f.hotspotRate)
	if err != nil {
		return configErrorf("--hotspot-rate: %v", err)
	}
	if usesWorkload(*c, workload.DriverRates) {
		c.Rates = rates
	}
	if usesWorkload(*c, workload.DriverHotspot) {
		c.HotspotRate = hot.String()
	}
	return nil
}

// caseRates lists the rates a case of workload w at size runs at: the
// config's, checked against the size, for the rates workloads, and one
// "" (no rate) for the others. Hotspot's light rate is checked here too.
func caseRates(c schema.Config, w workload.Kind, size int) ([]string, error) {
	if workload.IsHotspot(w.Name) {
		tcp := w.TCP
		given, err := workload.ParseRate(c.HotspotRate)
		if err == nil {
			r, _ := workload.HotspotRate(c.HotspotRate, tcp)
			if _, err = checkRate(r.String(), "--hotspot-rate", size, tcp); err != nil && r != given {
				err = fmt.Errorf("%v (%s in full segments of %d B)", err, given, workload.TCPMSS)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("workload %s: %v", w.Name, err)
		}
	}
	if !workload.IsRates(w.Name) {
		return []string{""}, nil
	}
	if len(c.Rates) == 0 {
		return nil, fmt.Errorf("workload %s: no --rates to run at", w.Name)
	}
	for _, spec := range c.Rates {
		if _, err := checkRate(spec, "--rates", size, w.TCP); err != nil {
			return nil, fmt.Errorf("workload %s: %v", w.Name, err)
		}
	}
	return c.Rates, nil
}

// checkRate reads a rate spec and checks it drives traffic of size bytes
// densely enough to be measured.
func checkRate(spec, flagName string, size int, tcp bool) (workload.Rate, error) {
	r, err := workload.ParseRate(spec)
	if err != nil {
		return r, fmt.Errorf("%s: %v", flagName, err)
	}
	bits, pps := r.At(size)
	switch {
	case tcp && r.PPS > 0:
		return r, fmt.Errorf("%s %s: TCP is held to bit rates (e.g. 500M), not packets/s: its segments are not the application's writes", flagName, spec)
	case tcp && bits/(workload.TCPMSS*8) < workload.MinRatePPS:
		return r, fmt.Errorf("%s %s: under %d full TCP segments/s, too sparse to measure (at least %s)", flagName, spec, workload.MinRatePPS,
			workload.FormatRate(math.Ceil(workload.MinRatePPS*workload.TCPMSS*8/1e5)*1e5))
	case !tcp && pps < workload.MinRatePPS:
		return r, fmt.Errorf("%s %s: %.0f datagrams/s of %s, too sparse to measure (at least %d/s)", flagName, spec, pps, workload.FormatSize(size), workload.MinRatePPS)
	case bits > workload.MaxRateBits:
		return r, fmt.Errorf("%s %s: %s is %s bit/s, more than %s", flagName, spec, workload.FormatSize(size), workload.FormatRate(math.Round(bits)), workload.FormatRate(workload.MaxRateBits))
	}
	return r, nil
}

func offered(spec string, size int) *schema.Offered {
	r, err := workload.ParseRate(spec)
	if spec == "" || err != nil {
		return nil
	}
	return offeredAt(spec, r, size)
}

func offeredAt(spec string, r workload.Rate, size int) *schema.Offered {
	bits, pps := r.At(size)
	return &schema.Offered{Spec: spec, BitsPerSecond: math.Round(bits), PacketsPerSecond: pps}
}

// describeCase records in a result what its workload needs said beyond
// the case's size and flows.
func describeCase(res *schema.Result, cs measure.Case, c schema.Config) {
	switch {
	case workload.IsRates(cs.Workload):
		res.Offered = offered(cs.Rate, cs.Size)
	case workload.IsHotspot(cs.Workload):
		if r, err := workload.HotspotRate(c.HotspotRate, workload.IsTCP(cs.Workload)); err == nil && c.HotspotRate != "" {
			res.Offered = offeredAt(c.HotspotRate, r, cs.Size)
		}
	}
}
