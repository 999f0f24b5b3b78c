package status

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeHealthz(ctx, ln) }()
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
