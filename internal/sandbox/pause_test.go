package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
)

// TestWaitPauseReadyBounded: a PID whose process never says it is ready
// (here the test itself, as under a PID namespace staticlet does not share)
// holds StartSandbox up for pauseReadyWait only, with no error; a caller
// that gives up still gets its error.
func TestWaitPauseReadyBounded(t *testing.T) {
	r := &Runtime{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	if err := r.waitPauseReady(context.Background(), uint32(os.Getpid()), nil); err != nil {
		t.Errorf("waiting for a process that never becomes ready: %v, want nil after %s", err, pauseReadyWait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.waitPauseReady(ctx, uint32(os.Getpid()), nil); err == nil {
		t.Error("waiting with a cancelled context: nil, want its error")
	}
}

// TestWaitPauseReadyExited: a pause process that exited before it was
// ready is an error with its exit code, whether it is still a zombie, gone
// from /proc already, or told of first; one gone and not told of is not.
func TestWaitPauseReadyExited(t *testing.T) {
	r := &Runtime{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	// A child of the test's that exited, reaped: its PID names nothing.
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	if err := cmd.Run(); err == nil {
		t.Fatal("sh -c 'exit 3' succeeded")
	}
	gonePid := uint32(cmd.ProcessState.Pid())
	at := time.Now()
	tests := []struct {
		name     string
		pid      uint32
		told     bool // the exit comes on the channel
		wantCode int  // -1: no error
	}{
		{name: "gone, told", pid: gonePid, told: true, wantCode: 3},
		{name: "gone, not told", pid: gonePid, wantCode: -1},
		{name: "running, not ready, told", pid: uint32(os.Getpid()), told: true, wantCode: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exited := make(chan client.ExitStatus, 1)
			if tt.told {
				exited <- *client.NewExitStatus(3, at, nil)
			}
			err := r.waitPauseReady(context.Background(), tt.pid, exited)
			var exit *pauseExit
			switch {
			case tt.wantCode < 0 && err != nil:
				t.Errorf("waitPauseReady = %v, want nil", err)
			case tt.wantCode >= 0 && (!errors.As(err, &exit) || exit.code != uint32(tt.wantCode) || exit.pid != tt.pid || !exit.at.Equal(at)):
				t.Errorf("waitPauseReady = %v, want the exit of %d with code %d", err, tt.pid, tt.wantCode)
			}
		})
	}
}

func TestPauseOutput(t *testing.T) {
	long := strings.Repeat("x", 2000)
	var many []string
	for i := 1; i <= 15; i++ {
		many = append(many, fmt.Sprintf("line %d", i))
	}
	tests := []struct {
		name, content, want string
	}{
		{"none", "", ""},
		{"one line", "boom\n", "boom"},
		{"loader", "/pause: error while loading shared libraries: libfoo.so.1: cannot open shared object file\n",
			"/pause: error while loading shared libraries: libfoo.so.1: cannot open shared object file"},
		{"lines, blank ones dropped", "a\n\n  b  \nc", "a; b; c"},
		{"the last ten lines", strings.Join(many, "\n") + "\n", strings.Join(many[5:], "; ")},
		{"the last KiB", long + "\nend\n", long[len(long)-(pauseOutputBytes-len("\nend\n")):] + "; end"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "pause.log")
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := pauseOutputAt(path); got != tt.want {
			t.Errorf("%s: pauseOutputAt = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := pauseOutputAt(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Errorf("pauseOutputAt(missing file) = %q, want empty", got)
	}
}
