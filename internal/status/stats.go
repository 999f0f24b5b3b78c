package status

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Bounds of the window of GET /stats/pods.
const (
	// DefaultStatsWindow is the window when the request names none.
	DefaultStatsWindow = time.Second
	// MaxStatsWindow keeps a request within the client's default timeout.
	MaxStatsWindow = 5 * time.Second
	// minStatsWindow keeps the CPU figure above the timer's noise.
	minStatsWindow = 100 * time.Millisecond
)

// PodStatsList is the answer of GET /stats/pods: the usage of every pod
// over one window, as kubectl top shows it.
type PodStatsList struct {
	// Time is when the window ended.
	Time time.Time `json:"time"`
	// Window is how long the CPU time was measured over, as a Go duration
	// ("1.0002s").
	Window string     `json:"window"`
	Pods   []PodStats `json:"pods"`
}

// PodStats is the usage of one pod, and of its running containers.
type PodStats struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Usage
	Containers []ContainerStats `json:"containers"`
}

// ContainerStats is the usage of one container.
type ContainerStats struct {
	Name string `json:"name"`
	Usage
}

// Usage is what a cgroup used: CPU as the kubelet's summary API gives it,
// in billionths of a core on average over the window, and the memory
// working set (usage less inactive page cache) at its end.
type Usage struct {
	CPUNanoCores          uint64 `json:"cpuNanoCores"`
	MemoryWorkingSetBytes uint64 `json:"memoryWorkingSetBytes"`
}

// StatsReader samples the usage of every pod over window; it blocks for
// about window, and returns early with an error when ctx ends.
type StatsReader func(ctx context.Context, window time.Duration) (*PodStatsList, error)

func (s *Server) podStats(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		s.writeError(w, r, http.StatusNotImplemented, "stats are not served by this staticlet")
		return
	}
	window := DefaultStatsWindow
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minStatsWindow || d > MaxStatsWindow {
			s.writeError(w, r, http.StatusBadRequest, "invalid window %q: want a duration from %v to %v", v, minStatsWindow, MaxStatsWindow)
			return
		}
		window = d
	}
	list, err := s.cfg.Stats(r.Context(), window)
	if err != nil {
		s.log.Warn("reading pods' usage", "err", err)
		s.writeError(w, r, http.StatusServiceUnavailable, "reading pods' usage: %v", err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list)
}

// PodStats returns every pod's usage over window; 0 leaves the window to
// the server (DefaultStatsWindow).
func (c *Client) PodStats(ctx context.Context, window time.Duration) (*PodStatsList, error) {
	path := "/stats/pods"
	if window > 0 {
		path += "?window=" + url.QueryEscape(window.String())
	}
	var list PodStatsList
	if err := c.getJSON(ctx, path, &list); err != nil {
		return nil, fmt.Errorf("reading pods' usage: %w", err)
	}
	return &list, nil
}
