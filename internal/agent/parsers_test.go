package agent

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// Numbers that are no numbers (NaN), or infinite, are refused by the
// parsers before anything runs: "elephant=NaN" once became
// 9223372036854775808 bit/s, and enable stopped the running agent before
// its replacement refused it.
func TestParsersRefuseNonFinite(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "1e400", "-1", "0x1p100", "NaNM"} {
		if r, err := parseRate(v); err == nil {
			t.Errorf("parseRate(%q) = %d", v, r)
		}
		o := DefaultOptions()
		if err := ParseMode("mflow:elephant="+v, &o); err == nil {
			t.Errorf("mode mflow:elephant=%s accepted: elephant %d", v, o.Elephant)
		}
		fs := flag.NewFlagSet("enable", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := AddFlags(fs)
		if err := fs.Parse([]string{"--mode", "mflow", "--elephant", v}); err != nil {
			t.Fatal(err)
		}
		if o, err := f.Options(); err == nil {
			t.Errorf("--elephant %s accepted: %d", v, o.Elephant)
		}
	}
}

// Errors quote a short prefix of bad input, never all of it.
func TestErrorsQuoteShortPrefix(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	for _, spec := range []string{long, "falcon:" + long, "falcon:" + long + "=1", "falcon:cpus=" + long, "mflow:elephant=" + long,
		"falcon:threshold=" + long, "falcon:metrics-addr=" + long + ":1", "falcon:metrics-addr=localhost:" + long} {
		o := DefaultOptions()
		err := ParseMode(spec, &o)
		if err == nil {
			err = o.validate()
		}
		if err == nil {
			t.Errorf("mode %.40s… accepted", spec)
		} else if len(err.Error()) > 500 {
			t.Errorf("mode %.40s…: %d bytes of error: %.600s", spec, len(err.Error()), err)
		}
	}
}
