package status

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTopServerStats(t *testing.T) {
	end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sample := &PodStatsList{Time: end, Window: "1.001s", Pods: []PodStats{{
		Namespace: "default", Name: "web",
		Usage:      Usage{CPUNanoCores: 250e6, MemoryWorkingSetBytes: 20 << 20},
		Containers: []ContainerStats{{Name: "nginx", Usage: Usage{CPUNanoCores: 250e6, MemoryWorkingSetBytes: 19 << 20}}},
	}}}
	// mu guards asked and fail: the reader runs in the server's goroutines.
	var (
		mu    sync.Mutex
		asked []time.Duration
		fail  error
	)
	reader := func(_ context.Context, window time.Duration) (*PodStatsList, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, window)
		return sample, fail
	}
	takeAsked := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		a := asked
		asked = nil
		return a
	}
	c := startServer(t, ServerConfig{Store: NewStore(), Stats: reader})
	ctx := context.Background()

	tests := []struct {
		name    string
		window  time.Duration
		asked   time.Duration
		wantErr string
	}{
		{name: "default window", window: 0, asked: DefaultStatsWindow},
		{name: "a window of its own", window: 300 * time.Millisecond, asked: 300 * time.Millisecond},
		{name: "too short", window: time.Millisecond, wantErr: "invalid window"},
		{name: "too long", window: time.Minute, wantErr: "invalid window"},
	}
	for _, tt := range tests {
		got, err := c.PodStats(ctx, tt.window)
		asked := takeAsked()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || asked != nil {
				t.Errorf("%s: PodStats(%v) = %v, asked %v, want error %q and no sample", tt.name, tt.window, err, asked, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, sample) {
			t.Errorf("%s: PodStats(%v) = %+v, %v, want %+v", tt.name, tt.window, got, err, sample)
		}
		if !reflect.DeepEqual(asked, []time.Duration{tt.asked}) {
			t.Errorf("%s: PodStats(%v) sampled over %v, want %v", tt.name, tt.window, asked, tt.asked)
		}
	}

	mu.Lock()
	fail = errors.New("containerd is away")
	mu.Unlock()
	if _, err := c.PodStats(ctx, 0); err == nil || !strings.Contains(err.Error(), "containerd is away") {
		t.Errorf("PodStats() with the runtime failing = %v, want its error", err)
	}

	none := startServer(t, ServerConfig{Store: NewStore()})
	if _, err := none.PodStats(ctx, 0); err == nil || !strings.Contains(err.Error(), "not served") {
		t.Errorf("PodStats() of a server without stats = %v, want not served", err)
	}
}
