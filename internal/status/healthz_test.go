package status

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// serveLoopback runs serve on a loopback port until cancel; done gets
// what it returned.
func serveLoopback(t *testing.T, serve func(context.Context, net.Listener) error) (ln net.Listener, cancel func(), done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln) }()
	return ln, cancel, served
}

// TestServeHealthz serves /healthz on a loopback port: the socket's answers,
// and nothing else of the API.
func TestServeHealthz(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	srv := NewServer(ServerConfig{Store: NewStore(), Health: func(context.Context) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("the reconcile loop is stuck")
	}})
	ln, cancel, done := serveLoopback(t, srv.ServeHealthz)
	base := "http://" + ln.Addr().String()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	tests := []struct {
		name     string
		healthy  bool
		path     string
		wantCode int
		wantBody string
	}{
		{"healthy", true, "/healthz", 200, "ok"},
		{"unhealthy", false, "/healthz", 503, "the reconcile loop is stuck"},
		{"pods not served", true, "/pods", 404, "404 page not found"},
		{"readyz not served", true, "/readyz", 404, "404 page not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			healthy.Store(tt.healthy)
			if code, body := get(tt.path); code != tt.wantCode || body != tt.wantBody {
				t.Errorf("GET %s = %d %q, want %d %q", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeHealthz() = %v, want nil after cancel", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("GET /healthz after shutdown succeeded, want connection refused")
	}
}

// TestMetricsEndpoint checks that GET /metrics is the configured handler,
// on the socket's API and alone on ServeMetrics' port (through
// Instrument), and absent from the API when none is configured.
func TestMetricsEndpoint(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") })
	var instrumented atomic.Int32
	with := NewServer(ServerConfig{Store: NewStore(), Metrics: metrics,
		Instrument: func(server string, h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if server == "metrics" {
					instrumented.Add(1)
				}
				h.ServeHTTP(w, r)
			})
		}})
	without := NewServer(ServerConfig{Store: NewStore()})
	ln, cancel, done := serveLoopback(t, with.ServeMetrics)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeMetrics() = %v, want nil after cancel", err)
		}
	}()
	port := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get("http://" + ln.Addr().String() + r.URL.Path)
		if err != nil {
			t.Fatalf("GET %s: %v", r.URL.Path, err)
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
	for _, tt := range []struct {
		name     string
		h        http.Handler
		path     string
		wantCode int
	}{
		{"socket", with.Handler(), "/metrics", 200},
		{"socket without metrics", without.Handler(), "/metrics", 404},
		{"port", port, "/metrics", 200},
		{"port serves nothing else", port, "/pods", 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
			if rec.Code != tt.wantCode {
				t.Errorf("GET %s = %d, want %d", tt.path, rec.Code, tt.wantCode)
			}
			if tt.wantCode == 200 && rec.Body.String() != "up 1\n" {
				t.Errorf("GET %s body = %q, want the metrics handler's", tt.path, rec.Body.String())
			}
		})
	}
	if n := instrumented.Load(); n != 2 {
		t.Errorf("Instrument's handler for server \"metrics\" saw %d requests, want the port's 2", n)
	}
}
