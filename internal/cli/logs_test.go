package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/status"
)

// TestSinceOptions: --since, --since-time and --limit-bytes become the
// options kubectl logs sends, and their misuse is refused as kubectl
// refuses it.
func TestSinceOptions(t *testing.T) {
	tests := []struct {
		name      string
		since     time.Duration
		sinceTime string
		limit     int64
		want      status.LogOptions
		wantErr   string
	}{
		{name: "none", want: status.LogOptions{}},
		{name: "since", since: 90 * time.Second, want: status.LogOptions{SinceSeconds: 90}},
		{name: "since under a second", since: 300 * time.Millisecond, want: status.LogOptions{SinceSeconds: 1}},
		{name: "since-time", sinceTime: "2026-11-21T03:15:00Z",
			want: status.LogOptions{SinceTime: time.Date(2026, 11, 21, 3, 15, 0, 0, time.UTC)}},
		{name: "limit", limit: 500, want: status.LogOptions{LimitBytes: 500}},
		{name: "both", since: time.Minute, sinceTime: "2026-11-21T03:15:00Z", wantErr: "at most one of"},
		{name: "negative since", since: -time.Minute, wantErr: "--since must be greater than 0"},
		{name: "bad time", sinceTime: "yesterday", wantErr: "no RFC 3339 time"},
		{name: "negative limit", limit: -1, wantErr: "--limit-bytes must be greater than 0"},
	}
	for _, tt := range tests {
		opts := status.LogOptions{LimitBytes: tt.limit}
		err := sinceOptions(&opts, tt.since, tt.sinceTime)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error = %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || opts != tt.want {
			t.Errorf("%s: options = %+v, %v; want %+v", tt.name, opts, err, tt.want)
		}
	}
}
