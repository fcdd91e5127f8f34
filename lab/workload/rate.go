package workload

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rate limits: iperf3 takes -b up to what its 64-bit counters hold, but
// beyond 100 Gbit/s no testbed here sends; below 200 datagrams (or full
// TCP segments) a second the start-of-traffic detection sees gaps, as
// --rate's floor says.
const (
	MaxRateBits = 100e9
	MaxRatePPS  = 100e6
	MinRatePPS  = 200
	TCPMSS      = 1448 // a full segment of the testbed's 1500 B wire, what TCP's floor is counted in
)

// Rate is one --rates entry: a bit rate of payload as iperf3's -b reads it
// ("100M", "1.5G", "800K", "2000000"; K, M and G are decimal, as iperf3's
// rates are), or a packet rate ("400Kpps"), which a case turns into the bit
// rate of its datagrams.
type Rate struct {
	Bits float64 // payload bit/s; 0 when given in packets/s
	PPS  float64 // datagrams/s; 0 when given in bit/s
}

// ParseRate reads a rate.
func ParseRate(s string) (Rate, error) {
	t := strings.TrimSpace(s)
	pps := false
	if u := strings.ToLower(t); strings.HasSuffix(u, "pps") {
		pps, t = true, strings.TrimSpace(t[:len(t)-3])
	} else if strings.HasSuffix(u, "bit/s") || strings.HasSuffix(u, "bps") {
		return Rate{}, fmt.Errorf("bad rate %q (write bit rates as iperf3's -b takes them: 100M, 1G; packet rates with pps: 400Kpps)", s)
	}
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'g', 'G':
			mult = 1e9
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	t = strings.TrimSpace(t)
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || strings.ContainsAny(t, "eEnNxX+-_") || v <= 0 || math.IsInf(v, 0) {
		return Rate{}, fmt.Errorf("bad rate %q (want a bit rate as iperf3's -b takes it, e.g. 100M, 1.5G, or a packet rate, e.g. 400Kpps)", s)
	}
	v *= mult
	if pps {
		if v < MinRatePPS || v > MaxRatePPS {
			return Rate{}, fmt.Errorf("rate %q out of range: %d .. %s packets/s", s, MinRatePPS, FormatRate(MaxRatePPS))
		}
		return Rate{PPS: math.Round(v)}, nil
	}
	if v < 1e3 || v > MaxRateBits {
		return Rate{}, fmt.Errorf("rate %q out of range: 1K .. %s bit/s", s, FormatRate(MaxRateBits))
	}
	return Rate{Bits: math.Round(v)}, nil
}

// String writes the rate the way ParseRate reads it, in the largest unit
// that keeps it to three decimals: "1G", "1.5G", "400Kpps".
func (r Rate) String() string {
	if r.PPS > 0 {
		return FormatRate(r.PPS) + "pps"
	}
	return FormatRate(r.Bits)
}

func FormatRate(v float64) string {
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "K"}} {
		if v >= u.div && math.Mod(v, u.div/1000) == 0 {
			return strconv.FormatFloat(v/u.div, 'f', -1, 64) + u.unit
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// at is the rate for payloads of size bytes: bit/s and datagrams/s.
func (r Rate) At(size int) (bits, pps float64) {
	if r.PPS > 0 {
		return r.PPS * float64(size) * 8, r.PPS
	}
	return r.Bits, r.Bits / (float64(size) * 8)
}

// HotspotRate is the rate a hotspot's light flows are held to: --hotspot-rate
// as given, except that for TCP a packet rate counts full segments of
// TCPMSS bytes (20Kpps is 231.68M), as the wire carries them. A TCP
// flow's writes of the case's size are not its packets (rates-tcp refuses
// packet rates for that reason), and converting at the write size would
// make 20Kpps of 128 KiB writes 21 Gbit/s, no light flow; at full segments
// the TCP flows run at about the packet rate the UDP flows of 1400 B do.
func HotspotRate(spec string, tcp bool) (Rate, error) {
	r, err := ParseRate(spec)
	if err != nil || !tcp || r.PPS == 0 {
		return r, err
	}
	return Rate{Bits: r.PPS * TCPMSS * 8}, nil
}
