package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestServerRestart(t *testing.T) {
	store := NewStore()
	store.SetPod(testPod("ns", "web", v1.PodRunning, true))
	type call struct{ pod, container string }
	var calls []call
	restart := func(ctx context.Context, pod, container string) error {
		calls = append(calls, call{pod, container})
		switch container {
		case "", "c":
			return nil
		case "gone":
			return fmt.Errorf("restarting pod %s: %w", pod, fs.ErrNotExist)
		}
		return errors.New("its restartPolicy is Never")
	}
	store.SetPod(func() *v1.Pod {
		p := testPod("ns", "other", v1.PodRunning, true)
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "gone"}, v1.Container{Name: "never"})
		return p
	}())
	c := startServer(t, ServerConfig{Store: store, Restart: restart})
	ctx := context.Background()

	tests := []struct {
		pod, container string
		want           RestartReply
		wantErr        string // in the error; "" for none
		notFound       bool
		called         bool
	}{
		{pod: "web", want: RestartReply{Namespace: "ns", Name: "web"}, called: true},
		{pod: "ns/other", container: "c", want: RestartReply{Namespace: "ns", Name: "other", Container: "c"}, called: true},
		{pod: "nope", wantErr: `pod "nope" not found`, notFound: true},
		{pod: "web", container: "x", wantErr: `container "x" not found in pod ns/web`, notFound: true},
		{pod: "other", container: "gone", wantErr: "restarting pod ns/other", notFound: true, called: true},
		{pod: "other", container: "never", wantErr: "its restartPolicy is Never", called: true},
	}
	for _, tt := range tests {
		calls = nil
		got, err := c.Restart(ctx, tt.pod, tt.container)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("Restart(%q, %q) = %+v, %v; want %+v", tt.pod, tt.container, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, ErrNotFound) != tt.notFound):
			t.Errorf("Restart(%q, %q) = %v, want an error with %q (not found: %v)", tt.pod, tt.container, err, tt.wantErr, tt.notFound)
		}
		if (len(calls) == 1) != tt.called {
			t.Errorf("Restart(%q, %q) called the Restarter %d times, want it called: %v", tt.pod, tt.container, len(calls), tt.called)
		}
	}
}

func TestServerRestartNotServed(t *testing.T) {
	store := NewStore()
	store.SetPod(testPod("ns", "web", v1.PodRunning, true))
	c := startServer(t, ServerConfig{Store: store})
	if _, err := c.Restart(context.Background(), "web", ""); err == nil || !strings.Contains(err.Error(), "not served") {
		t.Errorf("Restart without a Restarter = %v, want not served", err)
	}
}
