package agent

import (
	"errors"
	"flag"
	"io"
	"testing"
)

// FuzzParseMode: a mode spec (enable --mode, bench --modes, a results
// file's mode) is options or a *SettingError, never a panic; options
// written back as the agent's flags (Args, what enable starts the agent
// with) read back as the same settings.
func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"vanilla", "falcon", "falcon+split", "rps", "rps+", "rfs", "rfs+",
		"falcon:threshold=90,cpus=0-1,4,order=per-packet", "falcon+split:split-cpus=1,split-proto=udp,interval=20ms",
		"falcon:policy=paper,threshold=100", "falcon:guard-timeout=50ms,drain-timeout=2s,devices=vx0,eth0",
		"rfs+:flow-entries=4096", "rps+:rps-cpus=0-1", "falcon:", "falcon:90", "falcon:cpus=3-1", "falcon:threshold=101",
		"vanilla,falcon:cpus=0-1,4,rps+", "falcon:metrics-addr=127.0.0.1:9750", "falcon:threshold=90%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		modeRoundTrip(t, spec)
	})
}

func modeRoundTrip(t *testing.T, spec string) {
	t.Helper()
	o := DefaultOptions()
	if err := ParseMode(spec, &o); err != nil {
		var se *SettingError
		if !errors.As(err, &se) {
			t.Fatalf("ParseMode(%q): %v is no *SettingError", spec, err)
		}
		return
	}
	args := Args(o)
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fl := AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("ParseMode(%q) gave %+v; its flags %q do not parse: %v", spec, o, args, err)
	}
	back, err := fl.Options()
	if err != nil {
		t.Fatalf("ParseMode(%q) gave %+v; its flags %q are refused: %v", spec, o, args, err)
	}
	if !sameSettings(o, back) {
		t.Fatalf("ParseMode(%q) gave %+v; its flags %q read back as %+v", spec, o, args, back)
	}
}
