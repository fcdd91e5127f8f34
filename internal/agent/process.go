package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"syscall"

	"github.com/falconnet/falcon/internal/quote"
)

// The agent process's own settings: where it logs and where it serves
// metrics (settings.go lists them as process settings).

// Log formats of --log-format.
const (
	LogText = "text"
	LogJSON = "json"
)

// NewLogger writes the agent's log lines to w in format (LogText when "").
func NewLogger(w io.Writer, format string) *slog.Logger {
	if format == LogJSON {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// CheckMetricsAddr checks the syntax of --metrics-addr: HOST:PORT with a
// numeric port ("" = no metrics). Port 0 lets the kernel pick one, which
// the agent logs. A service name is refused: the DaemonSet's port and the
// scrape configuration must name the same number.
func CheckMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, err := splitMetricsAddr(addr)
	if err != nil {
		return err
	}
	if host != "" && net.ParseIP(host) == nil {
		if _, err := net.LookupHost(host); err != nil {
			return fmt.Errorf("%s: unknown host %s", quote.Short(addr), quote.Short(host))
		}
	}
	return nil
}

// splitMetricsAddr checks the form of addr, HOST:PORT, and returns its
// host; whether the host resolves is CheckMetricsAddr's to ask.
func splitMetricsAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s: want HOST:PORT, e.g. 127.0.0.1:9750 or :9750", quote.Short(addr))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("%s: port %s is not a number from 0 to 65535", quote.Short(addr), quote.Short(port))
	}
	return host, nil
}

// ListenMetrics checks addr and binds it. The agent binds before it
// attaches anything and serves once it runs, so that a port in use stops
// it while the system is still untouched.
func ListenMetrics(addr string) (net.Listener, error) {
	if err := CheckMetricsAddr(addr); err != nil {
		return nil, fmt.Errorf("--metrics-addr %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("--metrics-addr %s: the port is in use by another process (pick another with --metrics-addr)", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	return l, nil
}

// probeMetricsAddr: Enable binds the new agent's address for a moment
// before it stops a running agent, so that a port in use leaves the running
// agent alone. The running agent's own address is not probed: it frees it
// when it stops.
func probeMetricsAddr(o Options, running *State) error {
	if o.MetricsAddr == "" || running != nil && running.Options.MetricsAddr == o.MetricsAddr {
		return nil
	}
	l, err := ListenMetrics(o.MetricsAddr)
	if err != nil {
		return err
	}
	return l.Close()
}
