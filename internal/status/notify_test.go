package status

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// fakeSystemd listens on a unixgram socket standing in for systemd's
// NOTIFY_SOCKET and records every datagram.
type fakeSystemd struct {
	mu   sync.Mutex
	msgs []string
}

func startFakeSystemd(t *testing.T) *fakeSystemd {
	t.Helper()
	sock := filepath.Join(shortDir(t), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", sock)
	f := &fakeSystemd{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			f.mu.Lock()
			f.msgs = append(f.msgs, string(buf[:n]))
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return f
}

func (f *fakeSystemd) messages() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.msgs)
}

// has reports whether a received message equals msg.
func (f *fakeSystemd) has(msg string) bool { return slices.Contains(f.messages(), msg) }

func (f *fakeSystemd) count(msg string) int {
	n := 0
	for _, m := range f.messages() {
		if m == msg {
			n++
		}
	}
	return n
}

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
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

func TestNotifier(t *testing.T) {
	sd := startFakeSystemd(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "")

	store := NewStore()
	var alive atomic.Bool
	alive.Store(true)
	var logs syncBuffer
	n := NewNotifier(NotifierConfig{
		Store:  store,
		Alive:  alive.Load,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	// On an early failure, stop Run; the end of the test waits for it.
	defer cancel()

	const timeout = 5 * time.Second
	waitFor(t, timeout, "the first STATUS", func() bool { return sd.has("STATUS=starting: 0 pods") })

	store.SetPod(testPod("ns", "p", v1.PodRunning, true))
	waitFor(t, timeout, "STATUS with the pod", func() bool {
		return sd.has("STATUS=starting: 1 pod: 1 running, 1 ready")
	})
	if sd.count("READY=1") > 0 || strings.Contains(strings.Join(sd.messages(), "\n"), "READY=1") {
		t.Fatalf("READY=1 sent before the store was ready: %q", sd.messages())
	}

	store.SetReady()
	waitFor(t, timeout, "READY=1", func() bool { return sd.has("READY=1\nSTATUS=1 pod: 1 running, 1 ready") })

	store.SetManifests([]Manifest{{Path: "bad.yaml", Error: "invalid"}})
	waitFor(t, timeout, "STATUS with a manifest error", func() bool {
		return sd.has("STATUS=1 pod: 1 running, 1 ready; 1 manifest error")
	})

	waitFor(t, timeout, "WATCHDOG=1", func() bool { return sd.count("WATCHDOG=1") >= 2 })

	// A stalled loop withholds the ping and says so once.
	alive.Store(false)
	waitFor(t, timeout, "the stall warning", func() bool { return strings.Contains(logs.String(), "not alive") })
	alive.Store(true)
	waitFor(t, timeout, "the recovery", func() bool { return strings.Contains(logs.String(), "alive again") })
	pings := sd.count("WATCHDOG=1")
	waitFor(t, timeout, "WATCHDOG=1 after the recovery", func() bool { return sd.count("WATCHDOG=1") > pings })
	if c := strings.Count(logs.String(), "not alive"); c != 1 {
		t.Errorf("stall warning logged %d times, want once", c)
	}

	// Every STATUS sent differs from the one before: no duplicates.
	var last string
	for _, m := range sd.messages() {
		_, st, ok := strings.Cut(m, "STATUS=")
		if !ok || st == "stopping" {
			continue
		}
		if st == last {
			t.Errorf("STATUS=%s sent twice in a row", st)
		}
		last = st
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(timeout):
		t.Fatal("Run did not return after cancel")
	}
	waitFor(t, timeout, "STOPPING=1", func() bool {
		msgs := sd.messages()
		return len(msgs) > 0 && strings.HasPrefix(msgs[len(msgs)-1], "STOPPING=1")
	})
}

func TestNotifierCoalesces(t *testing.T) {
	sd := startFakeSystemd(t)
	t.Setenv("WATCHDOG_USEC", "")
	store := NewStore()
	store.SetReady()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewNotifier(NotifierConfig{Store: store}).Run(ctx) }()
	waitFor(t, 5*time.Second, "READY=1", func() bool { return sd.has("READY=1\nSTATUS=0 pods") })

	const pods = 200
	for i := range pods {
		store.SetPod(testPod("ns", "p"+strconv.Itoa(i), v1.PodRunning, true))
	}
	waitFor(t, 5*time.Second, "the final STATUS", func() bool { return sd.has("STATUS=200 pods: 200 running, 200 ready") })
	cancel()
	<-done
	if got := len(sd.messages()); got > pods/2 {
		t.Errorf("%d notifications for %d quick changes, want them coalesced", got, pods)
	}
}

func TestNotifierWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	err := NewNotifier(NotifierConfig{Store: NewStore()}).Run(context.Background())
	if err != nil {
		t.Errorf("Run() without NOTIFY_SOCKET = %v, want nil", err)
	}
}
