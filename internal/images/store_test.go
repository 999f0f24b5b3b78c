package images

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestNormalizeRef(t *testing.T) {
	tests := []struct {
		ref, want, reason string
	}{
		{ref: "busybox", want: "docker.io/library/busybox:latest"},
		{ref: "busybox:1.36", want: "docker.io/library/busybox:1.36"},
		{ref: "registry.k8s.io/etcd:3.5.9-0", want: "registry.k8s.io/etcd:3.5.9-0"},
		{ref: "localhost/busybox:test", want: "localhost/busybox:test"},
		{ref: "127.0.0.1:5000/x", want: "127.0.0.1:5000/x:latest"},
		{
			ref:  "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000",
			want: "docker.io/library/busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000",
		},
		{ref: "Busybox", reason: "InvalidImageName"},
		{ref: "busybox:bad!tag", reason: "InvalidImageName"},
		{ref: "a b", reason: "InvalidImageName"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := normalizeRef(tt.ref)
			if tt.reason != "" {
				if r := pod.WaitingReason(err, ""); r != tt.reason {
					t.Errorf("normalizeRef(%q) = %q, %v (reason %q), want reason %q", tt.ref, got, err, r, tt.reason)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("normalizeRef(%q) = %q, %v, want %q", tt.ref, got, err, tt.want)
			}
		})
	}
}

// TestPullGroup: concurrent pulls of one name share one call; a waiter
// that gives up returns at once, and the pull goes on for the others, even
// when the caller that started it gives up.
func TestPullGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPullGroup()
		var calls atomic.Int32
		release := make(chan struct{})
		wantErr := errors.New("registry says no")
		fn := func(ctx context.Context) (client.Image, error) {
			calls.Add(1)
			<-release
			if ctx.Err() != nil {
				return nil, errors.New("the pull saw its caller's cancellation")
			}
			return nil, wantErr
		}

		leaderCtx, cancelLeader := context.WithCancel(context.Background())
		defer cancelLeader()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[0] = g.do(leaderCtx, "img", fn)
		}()
		synctest.Wait() // the leader is in fn
		for i := 1; i < len(errs); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = g.do(context.Background(), "img", fn)
			}()
		}
		// A waiter whose context ends stops waiting.
		quitCtx, quit := context.WithTimeout(context.Background(), time.Second)
		defer quit()
		if _, err := g.do(quitCtx, "img", fn); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("do() of a waiter that gave up = %v, want %v", err, context.DeadlineExceeded)
		}
		cancelLeader()
		synctest.Wait() // every waiter is waiting on the call
		close(release)
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, wantErr) {
				t.Errorf("do() #%d = %v, want %v", i, err, wantErr)
			}
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("pull ran %d times, want once", n)
		}

		// Once done, the next pull of the name runs again, and a pull that
		// returns neither image nor error is an error.
		if _, err := g.do(context.Background(), "img", func(context.Context) (client.Image, error) { return nil, nil }); err == nil {
			t.Error("do() of a pull that returned no image and no error = nil, want an error")
		}
	})
}

func TestImageCacheKnown(t *testing.T) {
	var c imageCache
	if c.known("docker.io/library/busybox:1") {
		t.Error("empty cache knows an image")
	}
	c.put("docker.io/library/busybox:1", "sha256:aaa", &Resolved{})
	for name, want := range map[string]bool{
		"docker.io/library/busybox:1":  true,
		"docker.io/library/busybox:10": false,
		"docker.io/library/busybox":    false,
	} {
		if got := c.known(name); got != want {
			t.Errorf("known(%q) = %v, want %v", name, got, want)
		}
	}
}
