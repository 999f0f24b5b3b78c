package main

import (
	"context"
	"log/slog"

	"k8s.io/klog/v2"
)

// routeLibraryLogs sends what the Kubernetes libraries log through klog
// (the streaming servers of exec, attach and port forwarding log, for
// instance, each client that closes its WebSocket first) to staticlet's
// logger at debug level, instead of as unstructured lines on stderr: they
// describe a client's session, which staticlet's own errors already
// report when it matters.
func routeLibraryLogs(logger *slog.Logger) {
	klog.SetSlogLogger(slog.New(debugHandler{logger.Handler()}).With("from", "k8s-lib"))
}

// debugHandler logs every record at debug level.
type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

// Handle drops the record unless debug is enabled: logr, which klog's
// bridge goes through, logs errors without asking Enabled.
func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if !d.h.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugHandler{d.h.WithAttrs(attrs)}
}

func (d debugHandler) WithGroup(name string) slog.Handler { return debugHandler{d.h.WithGroup(name)} }
