package agent

import (
	"net"
	"strings"
	"testing"
)

func TestCheckMetricsAddr(t *testing.T) {
	for _, c := range []struct{ addr, err string }{
		{"", ""},
		{"127.0.0.1:9750", ""},
		{":9750", ""},
		{"[::1]:9750", ""},
		{"localhost:0", ""},
		{"9750", "want HOST:PORT"},
		{"127.0.0.1", "want HOST:PORT"},
		{"::1:9750", "want HOST:PORT"},
		{"127.0.0.1:http", "not a number"},
		{"127.0.0.1:65536", "not a number"},
		{"127.0.0.1:-1", "not a number"},
		{"no-such-host.invalid:9750", "unknown host"},
	} {
		err := CheckMetricsAddr(c.addr)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("CheckMetricsAddr(%q) = %v, want %q", c.addr, err, c.err)
		}
	}
}

func TestListenMetricsPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if l, err := ListenMetrics(busy.Addr().String()); err == nil {
		l.Close()
		t.Fatal("bound a port in use")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("error %q does not say the port is in use", err)
	}
	l, err := ListenMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// The process settings are flags of enable and agent, passed on to a
// spawned agent, but no key of a mode spec.
func TestProcessSettings(t *testing.T) {
	o := DefaultOptions()
	o.MetricsAddr, o.LogFormat = "127.0.0.1:9750", LogJSON
	args := strings.Join(Args(o), " ")
	for _, want := range []string{"--metrics-addr=127.0.0.1:9750", "--log-format=json"} {
		if !strings.Contains(args, want) {
			t.Errorf("Args = %s, want %s", args, want)
		}
	}
	if err := ParseMode("falcon:metrics-addr=127.0.0.1:9750", &o); err == nil {
		t.Error("a mode spec took metrics-addr")
	}
	if strings.Contains(ModeHelp(), "metrics-addr") {
		t.Error("the modes' help lists metrics-addr")
	}
}
