package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
)

// lineHandler writes an agent library's log as short lines for a person at
// a terminal ("falcon disable: message key=value"), which enable and
// disable print; the agent process itself logs with --log-format.
type lineHandler struct {
	w      io.Writer
	prefix string
	keep   func(slog.Record) bool // nil: every line
	attrs  []slog.Attr
}

func cliLogger(w io.Writer, prefix string, keep func(slog.Record) bool) *slog.Logger {
	return slog.New(&lineHandler{w: w, prefix: prefix, keep: keep})
}

func (h *lineHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	if h.keep != nil && !h.keep(r) {
		return nil
	}
	var b strings.Builder
	b.WriteString(h.prefix + r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	b.WriteByte('\n')
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clone(h.attrs), as...)
	return &c
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
