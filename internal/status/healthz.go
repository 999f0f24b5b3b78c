package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// HealthzHandler returns a handler that serves only GET /healthz, with the
// same answers as the status socket's: for a TCP port, where the rest of
// the API (pods, logs) is not to be served without the socket's
// permissions.
func (s *Server) HealthzHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	return mux
}

// ServeHealthz serves HealthzHandler on ln until ctx is cancelled, then
// shuts down gracefully. It closes ln.
func (s *Server) ServeHealthz(ctx context.Context, ln net.Listener) error {
	return serve(ctx, ln, s.instrument("healthz", s.HealthzHandler()), "healthz on "+ln.Addr().String(), s.log)
}

// ServeMetrics serves only GET /metrics, ServerConfig.Metrics, on ln
// until ctx is cancelled, then shuts down gracefully. It closes ln. Like
// ServeHealthz, it is for a TCP port, where the rest of the API is not
// served.
func (s *Server) ServeMetrics(ctx context.Context, ln net.Listener) error {
	if s.cfg.Metrics == nil {
		ln.Close()
		return fmt.Errorf("serving metrics on %s: no metrics configured", ln.Addr())
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.cfg.Metrics)
	return serve(ctx, ln, s.instrument("metrics", mux), "metrics on "+ln.Addr().String(), s.log)
}

// serve serves h on ln until ctx is cancelled, then shuts down, giving
// requests in flight shutdownTimeout. Requests see ctx, so log streams that
// follow end when staticlet stops instead of holding up the shutdown. what
// names the endpoint in errors.
func serve(ctx context.Context, ln net.Listener, h http.Handler, what string, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return RunHTTP(ctx, srv, func() error { return srv.Serve(ln) }, what)
}

// RunHTTP runs srv's serve (Serve or ServeTLS on a listener) until ctx is
// cancelled, then shuts srv down, giving requests in flight a few seconds.
// what names the endpoint in errors.
func RunHTTP(ctx context.Context, srv *http.Server, serve func() error, what string) error {
	served := make(chan error, 1)
	go func() { served <- serve() }()

	select {
	case err := <-served:
		// Serve closed the listener (which removes a unix socket).
		return fmt.Errorf("serving %s: %w", what, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", what, err)
	}
	if shutdownErr != nil {
		srv.Close()
		return fmt.Errorf("shutting down %s: %w", what, shutdownErr)
	}
	return nil
}
