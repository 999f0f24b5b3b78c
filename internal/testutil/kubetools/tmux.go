package kubetools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// TmuxConfig is what a TmuxSession runs.
type TmuxConfig struct {
	// Command is the program and its arguments, run in the session's one
	// pane as the test's own user.
	Command []string
	// Env are "KEY=value" settings added to the command's environment (which
	// is otherwise the test process's).
	Env []string
	// Width and Height are the pane's size in cells: 200 by 50 when zero.
	Width, Height int
}

// TmuxSession is a detached tmux session running one command, on a tmux
// server of its own (its socket in a temp dir of the test), so that it
// neither sees nor touches any other tmux session on the machine. Its screen
// stays after the command exits (remain-on-exit), so that a test can read
// what a client printed before it died. A TmuxSession is used by the one
// test that started it.
type TmuxSession struct {
	socket string
	name   string
}

// tmuxConf is the private server's configuration: keep the pane of a
// command that exited, and no status line, so that the screen is the
// program's alone.
const tmuxConf = "set -g remain-on-exit on\nset -g status off\n"

// StartTmux starts cfg's command in a new detached session, closed when t
// ends. It skips t in the unit tier; a machine without tmux skips t off CI
// and fails it with CI=true.
func StartTmux(t testing.TB, cfg TmuxConfig) *TmuxSession {
	t.Helper()
	tier.Integration(t, "tmux")
	if _, err := exec.LookPath("tmux"); err != nil {
		tier.Missing(t, "tmux not installed (apt-get install tmux)")
	}
	if len(cfg.Command) == 0 {
		t.Fatal("StartTmux: no command")
	}
	width, height := cfg.Width, cfg.Height
	if width == 0 {
		width = 200
	}
	if height == 0 {
		height = 50
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte(tmuxConf), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &TmuxSession{socket: filepath.Join(dir, "tmux.sock"), name: "kubetools"}
	args := []string{"-f", conf, "new-session", "-d", "-s", s.name,
		"-x", strconv.Itoa(width), "-y", strconv.Itoa(height)}
	for _, kv := range cfg.Env {
		args = append(args, "-e", kv)
	}
	args = append(args, cfg.Command...)
	if _, err := s.tmux(t.Context(), args...); err != nil {
		t.Fatalf("starting %q in tmux: %v", cfg.Command, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing tmux session: %v", err)
		}
	})
	return s
}

// Capture returns the pane's screen as text, one line per row.
func (s *TmuxSession) Capture(ctx context.Context) (string, error) {
	return s.tmux(ctx, "capture-pane", "-p", "-t", s.name)
}

// SendKeys types keys into the pane, each as tmux send-keys names it
// ("Enter", "Escape", "C-c", or literal text).
func (s *TmuxSession) SendKeys(ctx context.Context, keys ...string) error {
	_, err := s.tmux(ctx, append([]string{"send-keys", "-t", s.name}, keys...)...)
	return err
}

// Exited reports whether the pane's command has exited (its screen stays
// until Close).
func (s *TmuxSession) Exited(ctx context.Context) (bool, error) {
	out, err := s.tmux(ctx, "display-message", "-p", "-t", s.name, "#{pane_dead}")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) == "1", nil
}

// WaitFor waits up to timeout for the screen to show text, and returns the
// screen that does; it fails t with the last screen if none does.
func (s *TmuxSession) WaitFor(t testing.TB, timeout time.Duration, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var screen string
	for {
		var err error
		screen, err = s.Capture(ctx)
		if err == nil && strings.Contains(screen, text) {
			return screen
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %q on the tmux screen (last capture error: %v); screen:\n%s",
				timeout, text, err, screen)
		case <-tick.C:
		}
	}
}

// Close kills the session, which ends its command and, the session being
// its only one, the private tmux server. Closing a closed session does
// nothing.
func (s *TmuxSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.tmux(ctx, "has-session", "-t", s.name); err != nil {
		return nil // gone: closed before, or its server is
	}
	_, err := s.tmux(ctx, "kill-session", "-t", s.name)
	return err
}

// tmux runs a tmux command against the session's server and returns its
// output.
func (s *TmuxSession) tmux(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", s.socket}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("tmux %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
