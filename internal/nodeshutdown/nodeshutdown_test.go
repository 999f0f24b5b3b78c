package nodeshutdown

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/logindtest"
)

// timeout bounds every wait; none is waited out when things work.
const timeout = 30 * time.Second

// fakeNode records the manager's calls. ShutdownNode blocks until the
// test sends on proceed, noting meanwhile whether its ctx ended.
type fakeNode struct {
	proceed chan struct{}

	mu        sync.Mutex
	shutdowns []shutdownCall
	resumes   int
}

type shutdownCall struct {
	regular, critical time.Duration
	ctxEnded          bool // ShutdownNode's ctx ended before it returned
}

func newFakeNode() *fakeNode { return &fakeNode{proceed: make(chan struct{})} }

func (f *fakeNode) ShutdownNode(ctx context.Context, regular, critical time.Duration) error {
	f.mu.Lock()
	f.shutdowns = append(f.shutdowns, shutdownCall{regular: regular, critical: critical})
	f.mu.Unlock()
	<-f.proceed
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutdowns[len(f.shutdowns)-1].ctxEnded = ctx.Err() != nil
	return nil
}

func (f *fakeNode) ResumeNode() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumes++
}

func (f *fakeNode) calls() ([]shutdownCall, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]shutdownCall(nil), f.shutdowns...), f.resumes
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running is a Manager running against a fake logind.
type running struct {
	logind *logindtest.Logind
	node   *fakeNode
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// start starts the fake logind with cfg and a Manager with grace periods
// grace and critical against it, writing its drop-in to dropIn (in a temp
// directory when empty); the Manager is stopped when the test ends.
func start(t *testing.T, cfg logindtest.Config, dropIn string, grace, critical time.Duration) *running {
	t.Helper()
	r := &running{logind: logindtest.Start(t, cfg), node: newFakeNode(), logs: &syncBuffer{}, done: make(chan error, 1)}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", r.logind.Address)
	if dropIn == "" {
		dropIn = filepath.Join(t.TempDir(), "99-staticlet-shutdown.conf")
	}
	m := New(Config{GracePeriod: grace, CriticalGracePeriod: critical, Node: r.node, DropIn: dropIn,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case r.node.proceed <- struct{}{}: // a ShutdownNode left blocked
		default:
		}
		if err := <-r.done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
	return r
}

// lock waits for the n-th lock (from 1) to be taken and returns it.
func (r *running) lock(t *testing.T, n int) *logindtest.Lock {
	t.Helper()
	waitFor(t, "inhibitor lock being taken", func() bool {
		locks := r.logind.Locks()
		return len(locks) >= n && locks[n-1].Taken()
	})
	return r.logind.Locks()[n-1]
}

// TestShutdown: the manager takes a delay lock; on PrepareForShutdown(true)
// it calls ShutdownNode with the two budgets, holding the lock until that
// returns, then releases it; on PrepareForShutdown(false) it resumes the
// node and takes a new lock, released when Run ends.
func TestShutdown(t *testing.T) {
	drop := filepath.Join(t.TempDir(), "logind.conf.d", "99-staticlet-shutdown.conf")
	r := start(t, logindtest.Config{InhibitDelayMax: time.Minute, DropIn: drop}, drop, 30*time.Second, 10*time.Second)
	lock := r.lock(t, 1)
	if lock.What != "shutdown" || lock.Who != "staticlet" || lock.Why != "staticlet stops pods gracefully before shutdown" || lock.Mode != "delay" {
		t.Errorf("lock = %+v, want a delay lock on shutdown by staticlet, with its reason", *lock)
	}
	if _, err := os.Stat(drop); !os.IsNotExist(err) {
		t.Errorf("drop-in written though logind's delay is long enough: %v", err)
	}

	r.logind.PrepareForShutdown(t, true)
	waitFor(t, "ShutdownNode being called", func() bool { s, _ := r.node.calls(); return len(s) == 1 })
	calls, _ := r.node.calls()
	if c := calls[0]; c.regular != 20*time.Second || c.critical != 10*time.Second {
		t.Errorf("ShutdownNode(regular %v, critical %v), want 20s and 10s", c.regular, c.critical)
	}
	if lock.Released() {
		t.Fatal("lock released while ShutdownNode runs")
	}
	r.node.proceed <- struct{}{}
	waitFor(t, "the lock's release after ShutdownNode returned", lock.Released)

	// The shutdown is cancelled: the pods may run, and a new lock is held.
	r.logind.PrepareForShutdown(t, false)
	second := r.lock(t, 2)
	if _, resumes := r.node.calls(); resumes != 1 {
		t.Errorf("ResumeNode called %d times, want 1", resumes)
	}
	if second.Released() {
		t.Error("new lock released at once")
	}
	// A second announcement stops the pods again.
	r.logind.PrepareForShutdown(t, true)
	waitFor(t, "ShutdownNode being called again", func() bool { s, _ := r.node.calls(); return len(s) == 2 })
	r.node.proceed <- struct{}{}
	waitFor(t, "the new lock's release", second.Released)
	if n := len(r.logind.Locks()); n != 2 {
		t.Errorf("%d locks taken, want 2", n)
	}
}

// TestShutdownOutlastsRun: staticlet told to stop during a node shutdown
// lets ShutdownNode finish, with its context intact, before Run returns.
func TestShutdownOutlastsRun(t *testing.T) {
	r := start(t, logindtest.Config{InhibitDelayMax: time.Minute}, "", 30*time.Second, 0)
	lock := r.lock(t, 1)
	r.logind.PrepareForShutdown(t, true)
	waitFor(t, "ShutdownNode being called", func() bool { s, _ := r.node.calls(); return len(s) == 1 })
	r.cancel()
	select {
	case err := <-r.done:
		t.Fatalf("Run returned %v while ShutdownNode was running", err)
	default:
	}
	r.node.proceed <- struct{}{}
	if err := <-r.done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	r.done <- nil // for the cleanup
	if calls, _ := r.node.calls(); calls[0].ctxEnded {
		t.Error("ShutdownNode's context ended with Run's: want the stops finished")
	}
	waitFor(t, "the lock's release", lock.Released)
}

// TestBusGone: the system bus going away ends Run; a warning says
// graceful shutdown is lost, unless the node shutdown under way stops the
// bus, as a real shutdown does once the lock is released.
func TestBusGone(t *testing.T) {
	for _, tt := range []struct {
		name     string
		shutdown bool
		want     string
	}{
		{"during the node shutdown", true, "level=INFO msg=\"the system bus closed during the node shutdown\""},
		{"while pods run", false, "level=WARN msg=\"graceful node shutdown stopped: the system bus connection closed\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := start(t, logindtest.Config{InhibitDelayMax: time.Minute}, "", 30*time.Second, 0)
			lock := r.lock(t, 1)
			if tt.shutdown {
				r.logind.PrepareForShutdown(t, true)
				r.node.proceed <- struct{}{}
				waitFor(t, "the lock's release", lock.Released)
			}
			r.logind.StopBus(t)
			select {
			case err := <-r.done:
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
			case <-time.After(timeout):
				t.Fatalf("Run still runs %v after the bus went away", timeout)
			}
			r.done <- nil // for the cleanup
			logs := r.logs.String()
			if !strings.Contains(logs, tt.want) {
				t.Errorf("logs:\n%s\nwant %s", logs, tt.want)
			}
			if tt.shutdown && strings.Contains(logs, "level=WARN") {
				t.Errorf("a warning logged:\n%s", logs)
			}
		})
	}
}

// TestRaisesInhibitDelay: logind's InhibitDelayMaxSec shorter than the
// grace period is raised by a drop-in and a reload; when the reload does
// not raise it, the manager says so and holds the lock all the same.
func TestRaisesInhibitDelay(t *testing.T) {
	t.Run("raised", func(t *testing.T) {
		drop := filepath.Join(t.TempDir(), "logind.conf.d", "99-staticlet-shutdown.conf")
		r := start(t, logindtest.Config{InhibitDelayMax: 5 * time.Second, DropIn: drop}, drop, 90*time.Second+time.Millisecond, 0)
		r.lock(t, 1)
		b, err := os.ReadFile(drop)
		if err != nil || !strings.Contains(string(b), "[Login]\nInhibitDelayMaxSec=91\n") {
			t.Errorf("drop-in = %q, %v; want [Login] with InhibitDelayMaxSec=91", b, err)
		}
		if n := r.logind.Reloads(); n != 1 {
			t.Errorf("logind reloaded %d times, want 1", n)
		}
		if d := r.logind.InhibitDelayMax(); d != 91*time.Second {
			t.Errorf("InhibitDelayMax = %v after the reload, want 91s", d)
		}
		if strings.Contains(r.logs.String(), "level=WARN") {
			t.Errorf("warnings logged:\n%s", r.logs)
		}
	})
	t.Run("still short", func(t *testing.T) {
		// The fake's logind reads no drop-in.
		r := start(t, logindtest.Config{InhibitDelayMax: 5 * time.Second}, "", 30*time.Second, 0)
		r.lock(t, 1)
		if n := r.logind.Reloads(); n != 1 {
			t.Errorf("logind reloaded %d times, want 1", n)
		}
		if !strings.Contains(r.logs.String(), "still shorter than the shutdown grace period") {
			t.Errorf("no warning that the delay is still short in:\n%s", r.logs)
		}
	})
}

// TestWithoutLogind: with no system bus, or a grace period of zero, Run
// does nothing and returns nil, with a warning in the first case only.
func TestWithoutLogind(t *testing.T) {
	for _, tt := range []struct {
		name  string
		grace time.Duration
		warn  bool
	}{{"no bus", time.Minute, true}, {"no grace period", 0, false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "none"))
			logs := &syncBuffer{}
			m := New(Config{GracePeriod: tt.grace, Node: newFakeNode(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err := m.Run(t.Context()); err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
			if got := strings.Contains(logs.String(), "graceful node shutdown disabled"); got != tt.warn {
				t.Errorf("warning logged: %v, want %v; logs:\n%s", got, tt.warn, logs)
			}
		})
	}
}

// TestInvalidConfig: a critical share beyond the grace period is an error.
func TestInvalidConfig(t *testing.T) {
	for _, c := range []time.Duration{-time.Second, 2 * time.Minute} {
		if err := New(Config{GracePeriod: time.Minute, CriticalGracePeriod: c}).Run(t.Context()); err == nil {
			t.Errorf("Run with critical grace period %v = nil, want an error", c)
		}
	}
}
