package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves a collector on a listener the agent bound before it
// attached anything (agent.ListenMetrics).
type Server struct {
	*Collector
	srv *http.Server
	l   net.Listener
}

// NewServer serves c, with the Go runtime's and the process's own metrics,
// from a registry of its own: nothing else in the binary registers there.
func NewServer(l net.Listener, c *Collector, log *slog.Logger) *Server {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	// A namespace whose state cannot be read still gets the rest served.
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("falcon agent: metrics at /metrics\n"))
	})
	return &Server{Collector: c, l: l, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
}

// Addr is the address served (the port the kernel picked for port 0).
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Serve serves until Close.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops serving, letting a scrape under way finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}
