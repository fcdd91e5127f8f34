package workload

import "testing"

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{"100M": {Bits: 100e6}, "1G": {Bits: 1e9}, "1.5G": {Bits: 1.5e9}, "800k": {Bits: 800e3},
		"2000000": {Bits: 2e6}, " 2 G ": {Bits: 2e9}, "400Kpps": {PPS: 400e3}, "400kPPS": {PPS: 400e3}, "1Mpps": {PPS: 1e6}, "250pps": {PPS: 250}} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		back, err := ParseRate(got.String())
		if err != nil || back != got {
			t.Errorf("ParseRate(%q) = %+v writes as %q, which reads as %+v, %v", in, got, got.String(), back, err)
		}
	}
	for n, want := range map[Rate]string{{Bits: 1e9}: "1G", {Bits: 1.5e9}: "1.5G", {Bits: 1500}: "1.5K", {Bits: 1234567}: "1234.567K",
		{PPS: 400e3}: "400Kpps", {PPS: 250}: "250pps"} {
		if got := n.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", n, got, want)
		}
	}
	for _, in := range []string{"", "0", "M", "pps", "-1M", "1e9", "NaN", "Inf", "0x10", "1T", "1 Gbit/s", "1Gbps", "1.5.0M", "200G", "100pps", "1G pps x"} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %+v, want an error", in, got)
		}
	}
	// A packet rate is the bit rate of its datagrams.
	if bits, pps := (Rate{PPS: 400e3}).At(16); bits != 400e3*16*8 || pps != 400e3 {
		t.Errorf("400Kpps at 16 B: %g bit/s, %g/s", bits, pps)
	}
	if bits, pps := (Rate{Bits: 1e9}).At(1250); bits != 1e9 || pps != 1e5 {
		t.Errorf("1G at 1250 B: %g bit/s, %g/s", bits, pps)
	}
}
