package status

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// shortDir returns a temp dir with a path short enough for unix sockets
// (under 108 bytes), removed at the end of the test.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "st")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServer runs a server for cfg until the end of the test and returns
// a client for it once the socket answers.
func startServer(t *testing.T, cfg ServerConfig) *Client {
	t.Helper()
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(shortDir(t), "run", "s.sock")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(cfg).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		if _, err := os.Stat(cfg.Socket); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket still exists after Run returned: %v", err)
		}
	})
	c := NewClient(cfg.Socket)
	waitFor(t, 5*time.Second, "the server to answer", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run() returned early: %v", err)
		default:
		}
		_, err := c.getText(context.Background(), "/readyz")
		return err == nil
	})
	return c
}

func TestServerAPI(t *testing.T) {
	store := NewStore()
	store.SetPod(testPod("kube-system", "etcd-n1", v1.PodRunning, true))
	store.SetPod(testPod("a", "dup", v1.PodRunning, true))
	store.SetPod(testPod("b", "dup", v1.PodPending, false))
	store.SetManifests([]Manifest{{Source: "/m", Path: "/m/etcd.yaml", Pods: []string{"kube-system/etcd-n1"}}})
	store.Event(pod.Event{Pod: "kube-system/etcd-n1", Type: pod.EventNormal, Reason: "Started", Message: "Started container c"})
	store.Event(pod.Event{Pod: "a/dup", Type: pod.EventNormal, Reason: "Started"})

	c := startServer(t, ServerConfig{Store: store})
	ctx := context.Background()

	list, err := c.Pods(ctx)
	if err != nil {
		t.Fatalf("Pods() error: %v", err)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 3 {
		t.Errorf("Pods() = %s/%s with %d items, want v1/PodList with 3", list.APIVersion, list.Kind, len(list.Items))
	}

	for _, name := range []string{"etcd-n1", "kube-system/etcd-n1", "b/dup"} {
		p, err := c.Pod(ctx, name)
		if err != nil {
			t.Errorf("Pod(%q) error: %v", name, err)
			continue
		}
		if !strings.HasSuffix(name, p.Name) || p.Kind != "Pod" {
			t.Errorf("Pod(%q) = %s %s/%s", name, p.Kind, p.Namespace, p.Name)
		}
	}
	_, err = c.Pod(ctx, "nope")
	if !errors.Is(err, ErrNotFound) || err.Error() != `pod "nope" not found` {
		t.Errorf(`Pod("nope") error = %v, want pod "nope" not found`, err)
	}
	_, err = c.Pod(ctx, "dup")
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf(`Pod("dup") error = %v, want ambiguous`, err)
	}

	ms, err := c.Manifests(ctx)
	if err != nil || len(ms) != 1 || ms[0].Pods[0] != "kube-system/etcd-n1" {
		t.Errorf("Manifests() = %+v, %v", ms, err)
	}
	events, err := c.Events(ctx, "etcd-n1")
	if err != nil || len(events) != 1 || events[0].Reason != "Started" {
		t.Errorf("Events(etcd-n1) = %+v, %v", events, err)
	}
	if events, _ := c.Events(ctx, ""); len(events) != 2 {
		t.Errorf("Events() = %d events, want 2", len(events))
	}

	if err := c.Ready(ctx); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "not ready: waiting for") {
		t.Errorf("Ready() before SetReady = %v, want ErrNotReady with the server's reason", err)
	}
	store.SetReady()
	if err := c.Ready(ctx); err != nil {
		t.Errorf("Ready() after SetReady = %v", err)
	}
	if err := c.Health(ctx); err != nil {
		t.Errorf("Health() = %v", err)
	}
	_, err = c.Logs(ctx, "etcd-n1", "", LogOptions{TailLines: -1})
	if err == nil || !strings.Contains(err.Error(), "not served") {
		t.Errorf("Logs() without a LogOpener = %v, want not served (501)", err)
	}
}

func TestServerSocketMode(t *testing.T) {
	sock := filepath.Join(shortDir(t), "s.sock")
	startServer(t, ServerConfig{Socket: sock, Store: NewStore()})
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("socket mode = %o, want 600", got)
	}

	sock = filepath.Join(shortDir(t), "g.sock")
	startServer(t, ServerConfig{Socket: sock, Store: NewStore(), Group: strconv.Itoa(os.Getgid())})
	if fi, err = os.Stat(sock); err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o660 {
		t.Errorf("socket mode with a group = %o, want 660", got)
	}
}

func TestServerHealth(t *testing.T) {
	var mu sync.Mutex
	var healthErr error
	var deadline time.Duration
	health := func(ctx context.Context) error {
		d, _ := ctx.Deadline()
		mu.Lock()
		defer mu.Unlock()
		deadline = time.Until(d)
		return healthErr
	}
	c := startServer(t, ServerConfig{Store: NewStore(), Health: health})
	ctx := context.Background()
	if err := c.Health(ctx); err != nil {
		t.Errorf("Health() = %v, want nil", err)
	}
	mu.Lock()
	if deadline <= 0 || deadline > healthTimeout {
		t.Errorf("Health called with a deadline %v away, want within %v", deadline, healthTimeout)
	}
	healthErr = errors.New("containerd: connection refused")
	mu.Unlock()
	err := c.Health(ctx)
	if err == nil || err.Error() != "staticlet is unhealthy: containerd: connection refused" {
		t.Errorf("Health() = %v, want the reason", err)
	}
}

func TestServerLogs(t *testing.T) {
	store := NewStore()
	p := testPod("ns", "web", v1.PodRunning, true)
	store.SetPod(p)
	two := testPod("ns", "two", v1.PodRunning, true)
	two.Spec.Containers = append(two.Spec.Containers, v1.Container{Name: "d"})
	store.SetPod(two)

	type call struct {
		pod, container string
		opts           LogOptions
	}
	calls := make(chan call, 10)
	opener := func(ctx context.Context, pod, container string, opts LogOptions) (io.ReadCloser, error) {
		calls <- call{pod, container, opts}
		if container == "d" {
			return nil, fs.ErrNotExist
		}
		return io.NopCloser(strings.NewReader("line 1\nline 2\n")), nil
	}
	c := startServer(t, ServerConfig{Store: store, Logs: opener})
	ctx := context.Background()

	rc, err := c.Logs(ctx, "web", "", LogOptions{Follow: true, TailLines: 10, Previous: true, Timestamps: true})
	if err != nil {
		t.Fatalf("Logs() error: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "line 1\nline 2\n" {
		t.Errorf("Logs() read %q, %v", b, err)
	}
	want := call{"ns/web", "c", LogOptions{Follow: true, TailLines: 10, Previous: true, Timestamps: true}}
	if got := <-calls; got != want {
		t.Errorf("LogOpener called with %+v, want %+v", got, want)
	}

	for _, opts := range []LogOptions{
		{TailLines: -1, SinceTime: time.Date(2026, 11, 21, 3, 15, 0, 0, time.UTC), LimitBytes: 100},
		{TailLines: -1, SinceSeconds: 60},
	} {
		rc, err := c.Logs(ctx, "web", "", opts)
		if err != nil {
			t.Fatalf("Logs(%+v) error: %v", opts, err)
		}
		rc.Close()
		if got := <-calls; got.opts != opts {
			t.Errorf("LogOpener called with %+v, want %+v", got.opts, opts)
		}
	}

	if _, err := c.Logs(ctx, "two", "", LogOptions{TailLines: -1}); err == nil || !strings.Contains(err.Error(), "choose one of: [c d]") {
		t.Errorf("Logs(two) without container = %v, want choose one of", err)
	}
	if _, err := c.Logs(ctx, "two", "d", LogOptions{TailLines: -1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Logs(two, d) = %v, want not found", err)
	}
	if got := <-calls; got.opts.TailLines != -1 {
		t.Errorf("LogOpener TailLines = %d, want -1 when not given", got.opts.TailLines)
	}
	if _, err := c.Logs(ctx, "two", "x", LogOptions{TailLines: -1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Logs(two, x) = %v, want not found", err)
	}
	if _, err := c.Logs(ctx, "gone", "", LogOptions{TailLines: -1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Logs(gone) = %v, want not found", err)
	}
}

func TestServerFollowEndsAtShutdown(t *testing.T) {
	store := NewStore()
	store.SetPod(testPod("ns", "web", v1.PodRunning, true))
	opened := make(chan struct{})
	opener := func(ctx context.Context, pod, container string, opts LogOptions) (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte("hello\n"))
			<-ctx.Done()
			pw.CloseWithError(ctx.Err())
		}()
		close(opened)
		return pr, nil
	}
	sock := filepath.Join(shortDir(t), "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(ServerConfig{Socket: sock, Store: store, Logs: opener}).Run(ctx) }()
	c := NewClient(sock)
	waitFor(t, 5*time.Second, "the server", func() bool { return c.Health(context.Background()) == nil })

	rc, err := c.Logs(context.Background(), "web", "", LogOptions{Follow: true, TailLines: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	<-opened
	buf := make([]byte, 6)
	if _, err := io.ReadFull(rc, buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(shutdownTimeout):
		t.Fatal("Run did not return: a following log stream held up the shutdown")
	}
}

// staleSocket leaves a socket file in dir that nothing listens on any
// more, as a server killed would: it refuses connections.
func staleSocket(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	return path
}

func TestServerSocketFile(t *testing.T) {
	dir := shortDir(t)
	ctx := context.Background()

	// A stale socket (nobody listening) is replaced.
	stale := staleSocket(t, dir)
	c := startServer(t, ServerConfig{Socket: stale, Store: NewStore()})
	if err := c.Health(ctx); err != nil {
		t.Errorf("Health() after replacing a stale socket = %v", err)
	}

	// A live server is not replaced.
	err := NewServer(ServerConfig{Socket: stale, Store: NewStore()}).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Run() on a live socket = %v, want in use", err)
	}
	if err := c.Health(ctx); err != nil {
		t.Errorf("Health() of the first server after a second one failed = %v", err)
	}

	// A file that is not a socket is left alone.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o600)
	err = NewServer(ServerConfig{Socket: file, Store: NewStore()}).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Run() on a regular file = %v, want not a socket", err)
	}
}

func TestClientUnreachable(t *testing.T) {
	dir := shortDir(t)
	for _, sock := range []string{filepath.Join(dir, "missing.sock"), staleSocket(t, dir)} {
		_, err := NewClient(sock).Pods(context.Background())
		want := "cannot reach staticlet at " + sock + ": is it running? ("
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Pods() on %s = %v, want %q", sock, err, want)
		}
		if !errors.Is(err, ErrNotRunning) {
			t.Errorf("Pods() on %s = %v, want an error matching ErrNotRunning", sock, err)
		}
	}
}

func TestParseLogOptions(t *testing.T) {
	tests := []struct {
		query   string
		want    LogOptions
		wantErr string
	}{
		{"", LogOptions{TailLines: -1}, ""},
		{"follow=true&tailLines=5&timestamps=1", LogOptions{Follow: true, TailLines: 5, Timestamps: true}, ""},
		{"sinceSeconds=30&limitBytes=10", LogOptions{TailLines: -1, SinceSeconds: 30, LimitBytes: 10}, ""},
		{"sinceTime=2026-11-21T03:15:00Z", LogOptions{TailLines: -1, SinceTime: time.Date(2026, 11, 21, 3, 15, 0, 0, time.UTC)}, ""},
		{"sinceSeconds=0", LogOptions{}, "invalid sinceSeconds"},
		{"sinceTime=yesterday", LogOptions{}, "invalid sinceTime"},
		{"sinceSeconds=5&sinceTime=2026-11-21T03:15:00Z", LogOptions{}, "at most one of"},
		{"limitBytes=0", LogOptions{}, "invalid limitBytes"},
		{"tailLines=x", LogOptions{}, "invalid tailLines"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/pods/p/log?"+tt.query, nil)
		got, err := parseLogOptions(r)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseLogOptions(%q) error = %v, want %q", tt.query, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !got.SinceTime.Equal(tt.want.SinceTime) {
			t.Errorf("parseLogOptions(%q) = %+v, %v; want %+v", tt.query, got, err, tt.want)
			continue
		}
		got.SinceTime, tt.want.SinceTime = time.Time{}, time.Time{}
		if got != tt.want {
			t.Errorf("parseLogOptions(%q) = %+v, want %+v", tt.query, got, tt.want)
		}
	}
}

// TestLogOptionsSince: the later of sinceTime and now-sinceSeconds, as the
// kubelet takes them.
func TestLogOptionsSince(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 15, 0, 0, time.UTC)
	tests := []struct {
		name string
		opts LogOptions
		want time.Time
	}{
		{"none", LogOptions{}, time.Time{}},
		{"seconds", LogOptions{SinceSeconds: 60}, now.Add(-time.Minute)},
		{"time", LogOptions{SinceTime: now.Add(-time.Hour)}, now.Add(-time.Hour)},
		{"the later of both", LogOptions{SinceSeconds: 60, SinceTime: now.Add(-time.Hour)}, now.Add(-time.Minute)},
	}
	for _, tt := range tests {
		if got := tt.opts.Since(now); !got.Equal(tt.want) {
			t.Errorf("%s: Since() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
