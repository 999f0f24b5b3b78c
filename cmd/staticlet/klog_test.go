package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestRouteLibraryLogs: an error a library logs through klog reaches
// staticlet's logger at debug level, and not at all above it.
func TestRouteLibraryLogs(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug, `level=DEBUG msg="Error on socket receive" from=k8s-lib err="use of closed network connection"`},
		{slog.LevelInfo, ""},
	} {
		var buf bytes.Buffer
		routeLibraryLogs(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
		klog.ErrorS(errors.New("use of closed network connection"), "Error on socket receive")
		klog.Flush()
		got := buf.String()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("at %v the logger got %q, want %q", tc.level, got, tc.want)
		}
	}
	klog.ClearLogger()
}
